import { createDynamoDbClient } from '../../shared/aws/dynamodb.js';
import type { ManualClock } from '../../shared/clock.js';
import type { RateLimitSettings } from '../../shared/config/credential-sets.js';
import { planFor } from '../../shared/ledger/limit-plan.js';
import type { startDynalite } from '../../test/support/dynalite.js';
import { createFaultyDynamoDbClient } from '../../test/support/faulty-dynamodb.js';
import { countDynamoCalls, idealGrantTimes } from '../../test/support/ledger-harness.js';
import { type Contender, ledgerContender } from './contenders.js';
import { type ItemSizes, measureItemSizes } from './item-sizes.js';
import type { ScopedCount, VendorLimit } from './simulation.js';

export type Dynamo = Awaited<ReturnType<typeof startDynalite>>;

export const LEDGER_PROCESSES = 20;
/** Faults of the faulty-DynamoDB rows: a lost answer of an applied write, a throttle, a 500, per attempt. */
export const FAULTS = { lostAnswer: 0.08, throttle: 0.03, serverError: 0.03 };
export const FAULTS_LABEL = `DynamoDB losing ${FAULTS.lostAnswer * 100} % of write answers, ${FAULTS.throttle * 100} % throttles, ${FAULTS.serverError * 100} % 500s`;

export interface LedgerRun {
  contender: Contender;
  /** DynamoDB write attempts sent (SDK retries and throttled attempts included). */
  writes(): number;
  sizes(): ItemSizes;
  destroy(): void;
}

/** LEDGER_PROCESSES DynamoRateLedgers on one token and one fresh table, with writes counted and items measured. */
export async function ledgerRun(options: {
  dynamo: Dynamo;
  faulty: boolean;
  limits: RateLimitSettings;
  clock: ManualClock;
  seed: number;
  name: string;
}): Promise<LedgerRun> {
  const { dynamo, faulty, seed } = options;
  const client = faulty
    ? createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed, ...FAULTS }).client
    : createDynamoDbClient({ endpoint: dynamo.endpoint });
  const reader = createDynamoDbClient({ endpoint: dynamo.endpoint });
  const { writes } = countDynamoCalls(client);
  const sizes = measureItemSizes(client, reader);
  const contender = ledgerContender({
    name: options.name,
    client,
    tableName: await dynamo.createTable('bench-ledger'),
    clock: options.clock,
    limits: options.limits,
    processes: LEDGER_PROCESSES,
    tokenId: 'bench-token',
  });
  return {
    contender,
    writes,
    sizes,
    destroy: () => {
      client.destroy();
      reader.destroy();
    },
  };
}

/** The vendor's limits as the settings name them: general ones for every request, a class's for its own. */
export function vendorLimitsOf(limits: RateLimitSettings): VendorLimit[] {
  const plan = planFor(limits);
  return [
    ...plan.general.map((spec) => ({ limit: spec.limit, windowMs: spec.windowMs })),
    ...[...plan.classes].flatMap(([cls, specs]) =>
      specs.map((spec) => ({ limit: spec.limit, windowMs: spec.windowMs, cls })),
    ),
  ];
}

/**
 * Share of the quota of one scope's limits used: the permits counted against them that the vendor accepts, over
 * the most any scheduler could get through them alone in the run (idealGrantTimes).
 */
export function quotaUsed(
  accepted: readonly ScopedCount[],
  limits: readonly VendorLimit[],
  startMs: number,
  endMs: number,
): number {
  return accepted.length / idealGrantTimes(limits, startMs, endMs).length;
}

/** The item columns of a ledger row: what every write was charged, and its largest item. */
export function itemColumns(sizes: ItemSizes, granted: number): Record<string, number> {
  return {
    'writes reaching DynamoDB': sizes.writes,
    'of which head additions': sizes.headAdditions,
    'of which refused by their condition': sizes.refused,
    'write units per write': sizes.writes ? sizes.units / sizes.writes : 0,
    'write units per granted permit': granted ? sizes.units / granted : 0,
    'largest item (bytes)': sizes.largest,
    'writes over 1 KB': sizes.overOneUnit,
  };
}

export const percent = (share: number): string => `${(share * 100).toFixed(1)} %`;
