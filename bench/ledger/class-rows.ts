import type { BenchRow } from '../../local/format-table.js';
import { ManualClock } from '../../shared/clock.js';
import { rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import { planFor } from '../../shared/ledger/limit-plan.js';
import { maxInAnySpan, seededRandom } from '../../test/support/ledger-harness.js';
import {
  type Dynamo,
  FAULTS_LABEL,
  itemColumns,
  LEDGER_PROCESSES,
  ledgerRun,
  percent,
  quotaUsed,
  vendorLimitsOf,
} from './ledger-run.js';
import { type Scenario, simulate, vendorAcceptedPermits } from './simulation.js';

/** Four request classes of 25/min + 500/h beside the general 50/min + 1000/h: item format 2 (packed) by itself. */
export const CLASSES = ['reports', 'rebalancing', 'exports', 'bulk-orders'] as const;
const CLASS_LIMITS = [
  { limit: 25, windowSeconds: 60 },
  { limit: 500, windowSeconds: 3600 },
];
export const CLASS_SETTINGS = rateLimitSettingsSchema.parse({
  classes: Object.fromEntries(CLASSES.map((name) => [name, CLASS_LIMITS])),
});

/** The scopes whose limits each demand asks more of than they allow (the others it does not reach). */
const BINDING: Record<Scenario, readonly string[]> = {
  steady: ['general'],
  bursts: ['general'],
  'one-class-busy': [CLASSES[0]],
};

/** The goals of issue 23: of each binding limit, at least this share used; at most one write per permit. */
export const GOAL_USED = 0.97;
export const GOAL_WRITES_PER_PERMIT = 1;

/**
 * One simulated run with the four classes: a summary row (writes, write units, item size, goals) and a row per
 * scope (the general limits, each class's), each with its own quota use and vendor refusals.
 */
export async function classRun(
  dynamo: Dynamo,
  scenario: Scenario,
  faulty: boolean,
  seed: number,
  hours: number,
): Promise<{ summary: BenchRow; scopes: BenchRow[] }> {
  const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
  const dynamoLabel = faulty ? FAULTS_LABEL : 'no faults';
  const run = await ledgerRun({
    dynamo,
    faulty,
    limits: CLASS_SETTINGS,
    clock,
    seed,
    name: `DynamoRateLedger, ${LEDGER_PROCESSES} processes, item format ${planFor(CLASS_SETTINGS).itemFormat}`,
  });
  const start = clock.now();
  const end = start + hours * 3600_000;
  const result = await simulate(run.contender, scenario, clock, seededRandom(seed), end - start, CLASSES);
  run.destroy();
  const vendorLimits = vendorLimitsOf(CLASS_SETTINGS);
  const accepted = vendorAcceptedPermits(result.grants, vendorLimits);
  const granted = result.grants.reduce((sum, g) => sum + g.count, 0);
  const scopes: BenchRow[] = [];
  const shortOf: string[] = [];
  for (const scope of ['general', ...CLASSES]) {
    const inScope = <T extends { cls?: string }>(list: readonly T[]) =>
      scope === 'general' ? list : list.filter((entry) => entry.cls === scope);
    const limits = vendorLimitsOf(CLASS_SETTINGS).filter((l) =>
      scope === 'general' ? l.cls === undefined : l.cls === scope,
    );
    const grants = inScope(result.grants);
    const counted = grants.reduce((sum, g) => sum + g.count, 0);
    const used = quotaUsed(inScope(accepted), limits, start, end);
    const binds = BINDING[scenario].includes(scope);
    if (binds && used < GOAL_USED) shortOf.push(`${scope} ${percent(used)} used`);
    scopes.push({
      demand: scenario,
      DynamoDB: dynamoLabel,
      limits: `${scope} ${limits.map((l) => `${l.limit}/${l.windowMs / 1000} s`).join(' + ')}`,
      binds: binds ? 'yes' : 'no',
      'permits counted': counted,
      'max in any 60 s': maxInAnySpan(grants, 60_000),
      'max in any 3600 s': maxInAnySpan(grants, 3600_000),
      'vendor would refuse': counted - inScope(accepted).length,
      'quota used': percent(used),
    });
  }
  const writes = run.writes();
  const sizes = run.sizes();
  const perPermit = granted ? writes / granted : 0;
  const refused = granted - accepted.length;
  const misses = [
    ...shortOf,
    ...(perPermit > GOAL_WRITES_PER_PERMIT ? [`${perPermit.toFixed(3)} writes per permit`] : []),
    ...(sizes.overOneUnit > 0 ? [`${sizes.overOneUnit} writes over 1 KB`] : []),
    ...(refused > 0 ? [`${refused} refused by the vendor`] : []),
  ];
  return {
    summary: {
      demand: scenario,
      limiter: run.contender.name,
      DynamoDB: dynamoLabel,
      'permits asked': result.asked,
      'permits granted': granted,
      'grants (answers)': result.grants.length,
      'vendor would refuse': refused,
      'DynamoDB writes': writes,
      'writes per granted permit': perPermit,
      ...itemColumns(sizes, granted),
      errors: result.failures,
      goals: misses.length === 0 ? 'met' : `NOT MET: ${misses.join(', ')}`,
    },
    scopes,
  };
}
