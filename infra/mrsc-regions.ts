import * as z from 'zod';

/**
 * DynamoDB multi-Region strong consistency (MRSC) exists only within fixed Region sets: a table's two replicas
 * and its witness must all be Regions of one set (AWS CloudFormation, AWS::DynamoDB::GlobalTable
 * GlobalTableWitness, as of aws-cdk-lib 2.276). Checked at synth, because CloudFormation would only refuse the
 * table after the key and replica-key stacks were already deployed. Extend these lists when AWS does.
 */
export const MRSC_REGION_SETS = {
  US: ['us-east-1', 'us-east-2', 'us-west-2'],
  EU: ['eu-west-1', 'eu-west-2', 'eu-west-3', 'eu-central-1'],
  AP: ['ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3'],
} as const satisfies Record<string, readonly string[]>;

const ALL_MRSC_REGIONS: readonly string[] = Object.values(MRSC_REGION_SETS).flat();

/** The Region set a Region belongs to, if MRSC has one for it. */
export function mrscRegionSetOf(region: string): keyof typeof MRSC_REGION_SETS | undefined {
  return (Object.keys(MRSC_REGION_SETS) as (keyof typeof MRSC_REGION_SETS)[]).find((set) =>
    (MRSC_REGION_SETS[set] as readonly string[]).includes(region),
  );
}

const describeSets = (): string =>
  Object.entries(MRSC_REGION_SETS)
    .map(([name, regions]) => `${name}: ${regions.join(', ')}`)
    .join('; ');

const mrscRegionSchema = z.string().refine((region) => ALL_MRSC_REGIONS.includes(region), {
  error: (issue) =>
    `"${String(issue.input)}" is in no DynamoDB multi-Region strong consistency Region set (${describeSets()})`,
});

/**
 * Two serving Regions and the witness of the lease/token table (docs/deploying.md, Two Regions). `home` is the
 * stage's own Region (its stack keeps the stage's stack name); `peer` runs the second broker; `witness` only
 * takes part in the MRSC table's quorum, nothing runs there.
 */
export const regionsSchema = z.strictObject({
  home: mrscRegionSchema,
  peer: mrscRegionSchema,
  witness: mrscRegionSchema,
});
export type RegionsSettings = z.infer<typeof regionsSchema>;

/** What is wrong with a valid-looking triple: one issue per key, each naming what it should be. */
export function regionsIssues(
  regions: RegionsSettings,
  stageRegion: string,
): { key: keyof RegionsSettings; message: string }[] {
  const issues: { key: keyof RegionsSettings; message: string }[] = [];
  if (regions.home !== stageRegion) {
    issues.push({ key: 'home', message: `must be the stage's own Region "${stageRegion}"` });
  }
  if (regions.peer === regions.home) issues.push({ key: 'peer', message: 'must differ from home' });
  if (regions.witness === regions.home || regions.witness === regions.peer) {
    issues.push({ key: 'witness', message: 'must differ from home and peer' });
  }
  const homeSet = mrscRegionSetOf(regions.home);
  for (const key of ['peer', 'witness'] as const) {
    const set = mrscRegionSetOf(regions[key]);
    if (homeSet !== undefined && set !== undefined && set !== homeSet) {
      issues.push({
        key,
        message: `"${regions[key]}" is in the ${set} Region set, home "${regions.home}" in the ${homeSet} set: MRSC needs all three in one set (${homeSet}: ${MRSC_REGION_SETS[homeSet].join(', ')})`,
      });
    }
  }
  return issues;
}
