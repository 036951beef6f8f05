import * as z from 'zod';
import { describeIssues } from '../shared/config/credential-sets.js';
import { unknownKeysError } from '../shared/config/unknown-keys.js';
import { ConfigurationError } from '../shared/errors.js';
import type { StageConfig } from './stage-config.js';

/**
 * The optional deployment pipeline (`npm run synth:pipeline`, stack `TokenBroker-pipeline`): where it runs,
 * which repository and branch it follows, and what it smoke-tests. Validated at synth like a stage, and
 * against the stages it deploys, so that a pipeline that could not pass its own smoke test fails the synth.
 */
export const pipelineConfigSchema = z.strictObject({
  /** The account and Region the pipeline itself lives in (a tooling account; each stage trusts it). */
  account: z.string().regex(/^\d{12}$/, 'a 12-digit AWS account id'),
  region: z.string().regex(/^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$/, 'an AWS Region such as eu-west-1'),
  /** A CodeConnections (CodeStar Connections) connection to the Git host, created and authorised once. */
  connectionArn: z
    .string()
    .regex(
      /^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:connection\/[0-9a-f-]{36}$/,
      'a CodeConnections connection ARN, e.g. arn:aws:codeconnections:eu-west-1:123456789012:connection/<uuid>',
    ),
  /** `owner/name` on the Git host. */
  repository: z.string().regex(/^[\w.-]+\/[\w.-]+$/, 'owner/name of the repository'),
  branch: z.string().regex(/^[\w./-]{1,100}$/, 'a branch name'),
  /** The stage deployed and smoke-tested first, and the one deployed after the approval. */
  uatStage: z.string().default('uat'),
  prodStage: z.string().default('prod'),
  smokeTest: z.strictObject({
    /** The UAT credential set whose token the smoke test fetches (`token-broker token <set>`). */
    credentialSet: z.string().min(1),
    /**
     * The name of the role (in the pipeline's account) the smoke-test step runs as; its ARN must be a
     * consumer of the UAT stage allowed that set.
     */
    roleName: z.string().regex(/^[\w+=,.@-]{1,64}$/, 'an IAM role name'),
  }),
});

export type PipelineInput = z.input<typeof pipelineConfigSchema>;
export type PipelineConfig = z.infer<typeof pipelineConfigSchema>;

export const smokeTestRoleArn = (pipeline: PipelineConfig): string =>
  `arn:aws:iam::${pipeline.account}:role/${pipeline.smokeTest.roleName}`;

/** Validates the pipeline and its stages; a wrong value throws a ConfigurationError naming the field. */
export function parsePipelineConfig(
  input: PipelineInput,
  stages: readonly StageConfig[],
): { pipeline: PipelineConfig; uat: StageConfig; prod: StageConfig } {
  const result = pipelineConfigSchema.safeParse(input, { error: unknownKeysError });
  if (!result.success) {
    throw new ConfigurationError(`invalid pipeline: ${describeIssues(result.error, 'pipeline')}`);
  }
  const pipeline = result.data;
  const fail = (field: string, message: string): never => {
    throw new ConfigurationError(`invalid pipeline: pipeline.${field}: ${message}`);
  };
  const known = stages.map((stage) => stage.name).join(', ');
  const uat = stages.find((stage) => stage.name === pipeline.uatStage);
  const prod = stages.find((stage) => stage.name === pipeline.prodStage);
  if (!uat) return fail('uatStage', `unknown stage "${pipeline.uatStage}"; known: ${known}`);
  if (!prod) return fail('prodStage', `unknown stage "${pipeline.prodStage}"; known: ${known}`);
  if (uat === prod) return fail('prodStage', 'must differ from uatStage');
  // The pipeline deploys one stack per stage; a two-Region stage's five stacks are deployed by hand for now
  // (docs/deploying.md, Two Regions).
  for (const [field, stage] of [
    ['uatStage', uat],
    ['prodStage', prod],
  ] as const) {
    if (stage.regions)
      fail(field, `stage "${stage.name}" has regions: the pipeline deploys one-Region stages only`);
  }
  if (uat.vendorEnvironment !== 'uat') {
    fail(
      'uatStage',
      `stage "${uat.name}" serves the vendor's "${uat.vendorEnvironment}" environment, not "uat"`,
    );
  }
  if (!prod.production) fail('prodStage', `stage "${prod.name}" is not a production stage`);
  const { credentialSet } = pipeline.smokeTest;
  if (!uat.credentialSets.some((set) => set.id === credentialSet)) {
    fail('smokeTest.credentialSet', `stage "${uat.name}" has no credential set "${credentialSet}"`);
  }
  const role = smokeTestRoleArn(pipeline);
  if (!uat.consumers.some((c) => c.principalArn === role && c.credentialSets.includes(credentialSet))) {
    fail(
      'smokeTest.roleName',
      `${role} must be a consumer of stage "${uat.name}" allowed "${credentialSet}" (add it to its consumers)`,
    );
  }
  return { pipeline, uat, prod };
}
