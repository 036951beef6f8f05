/**
 * The rate ledger beside rate-limiter-flexible's RateLimiterDynamo (two of them in a RateLimiterUnion, for
 * 50 per minute and 1000 per hour, the way its users combine limits), on the same dynalite, through the real
 * DynamoDB client, with writes counted at each client.
 * - Simulated (ManualClock; Date.now follows it while rate-limiter-flexible runs): 3 hours of two demand
 *   patterns; the most granted in any 60 s and 3600 s span, the permits an exact sliding-window vendor would
 *   refuse, DynamoDB writes per granted permit, and the share of the quota used (permits the vendor accepts /
 *   the most any scheduler could get through in the same 3 hours, see idealGrantTimes).
 * - Real time: grants per second at 1, 8 and 32 concurrent consumers, limits out of reach.
 */
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock, systemClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { startDynalite } from '../test/support/dynalite.js';
import { createFaultyDynamoDbClient } from '../test/support/faulty-dynamodb.js';
import {
  countDynamoCalls,
  fillLedgerItem,
  idealGrantTimes,
  maxInAnySpan,
  seededRandom,
} from '../test/support/ledger-harness.js';
import type { BenchRow, BenchTable } from './format-table.js';
import {
  type Contender,
  createFlexibleTable,
  flexibleClient,
  flexibleContender,
  ledgerContender,
} from './ledger/contenders.js';
import { type Scenario, simulate, slidingVendorRejections } from './ledger/simulation.js';
import { measureThroughput } from './ledger/throughput.js';

const HOURS = 3;
const VENDOR_LIMITS = [
  { limit: 50, windowMs: 60_000 },
  { limit: 1000, windowMs: 3600_000 },
];
const FLEXIBLE_LIMITS = [
  { points: 50, duration: 60 },
  { points: 1000, duration: 3600 },
];
const LEDGER_PROCESSES = 20;
const CONCURRENCY = [1, 8, 32];
const THROUGHPUT_MS = 2000;
/** The default general limits with no class, and at the class bound (one class of 10 a minute). */
const ITEM_CASES: [string, unknown][] = [
  ['50/60 s + 1000/3600 s, no class', {}],
  [
    '50/60 s + 1000/3600 s + class 10/60 s (the class bound)',
    { classes: { reports: [{ limit: 10, windowSeconds: 60 }] } },
  ],
];

type Dynamo = Awaited<ReturnType<typeof startDynalite>>;

/** Date.now() follows the simulated clock while `body` runs (rate-limiter-flexible reads no other clock). */
async function onClock<T>(clock: ManualClock, body: () => Promise<T>): Promise<T> {
  const realNow = Date.now;
  Date.now = () => clock.now();
  try {
    return await body();
  } finally {
    Date.now = realNow;
  }
}

/** Faults of the faulty-DynamoDB row: a lost answer of an applied write, a throttle, a 500, per attempt. */
const FAULTS = { lostAnswer: 0.08, throttle: 0.03, serverError: 0.03 };

async function quotaRow(
  dynamo: Dynamo,
  scenario: Scenario,
  kind: 'ledger' | 'ledger-faulty' | 'flexible',
  seed: number,
): Promise<BenchRow> {
  const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
  const random = seededRandom(seed);
  let contender: Contender;
  let writes: () => number;
  let destroy: () => void;
  if (kind !== 'flexible') {
    const client =
      kind === 'ledger'
        ? createDynamoDbClient({ endpoint: dynamo.endpoint })
        : createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed, ...FAULTS }).client;
    writes = countDynamoCalls(client).writes;
    destroy = () => client.destroy();
    contender = ledgerContender({
      name:
        kind === 'ledger'
          ? `DynamoRateLedger, ${LEDGER_PROCESSES} processes`
          : `DynamoRateLedger, ${LEDGER_PROCESSES} processes, DynamoDB losing ${FAULTS.lostAnswer * 100} % of write answers, ${FAULTS.throttle * 100} % throttles, ${FAULTS.serverError * 100} % 500s`,
      client,
      tableName: await dynamo.createTable('bench-ledger'),
      clock,
      limits: rateLimitSettingsSchema.parse({}),
      processes: LEDGER_PROCESSES,
      tokenId: 'bench-token',
    });
  } else {
    const client = flexibleClient(dynamo.endpoint);
    const tableName = `bench-flexible-${scenario}-${seed}`;
    await createFlexibleTable(client, tableName);
    writes = countDynamoCalls(client).writes;
    destroy = () => client.destroy();
    contender = flexibleContender({
      name: 'RateLimiterDynamo ×2 + Union',
      client,
      tableName,
      limits: FLEXIBLE_LIMITS,
      key: 'bench-token',
    });
  }
  const start = clock.now();
  const durationMs = HOURS * 3600_000;
  const run = () => simulate(contender, scenario, clock, random, durationMs);
  const result = kind === 'flexible' ? await onClock(clock, run) : await run();
  destroy();
  const granted = result.grants.reduce((sum, g) => sum + g.count, 0);
  const refused = slidingVendorRejections(result.grants, VENDOR_LIMITS);
  const allowed = idealGrantTimes(VENDOR_LIMITS, start, start + durationMs).length;
  return {
    demand: scenario,
    limiter: contender.name,
    'permits asked': result.asked,
    'permits granted': granted,
    'max in any 60 s': maxInAnySpan(result.grants, 60_000),
    'max in any 3600 s': maxInAnySpan(result.grants, 3600_000),
    'vendor would refuse': refused,
    'DynamoDB writes': writes(),
    'writes per granted permit': granted ? writes() / granted : 0,
    'quota used': `${(((granted - refused) / allowed) * 100).toFixed(1)} %`,
    errors: result.failures,
  };
}

async function throughputRow(
  dynamo: Dynamo,
  kind: 'ledger-shared' | 'ledger-per-consumer' | 'flexible',
): Promise<BenchRow> {
  const row: BenchRow = {};
  for (const consumers of CONCURRENCY) {
    let contender: Contender;
    let counter: ReturnType<typeof countDynamoCalls>;
    let destroy: () => void;
    if (kind === 'flexible') {
      const client = flexibleClient(dynamo.endpoint);
      const tableName = `bench-flexible-throughput-${consumers}`;
      await createFlexibleTable(client, tableName);
      counter = countDynamoCalls(client);
      destroy = () => client.destroy();
      const huge = FLEXIBLE_LIMITS.map((l) => ({ ...l, points: 1e9 }));
      contender = flexibleContender({
        name: 'RateLimiterDynamo ×2 + Union',
        client,
        tableName,
        limits: huge,
        key: 'k',
      });
    } else {
      const client = createDynamoDbClient({ endpoint: dynamo.endpoint });
      counter = countDynamoCalls(client);
      destroy = () => client.destroy();
      contender = ledgerContender({
        name:
          kind === 'ledger-shared'
            ? 'DynamoRateLedger, one per process'
            : 'DynamoRateLedger, one per consumer',
        client,
        tableName: await dynamo.createTable('bench-throughput'),
        clock: systemClock,
        // Out of reach of a 2 s run, and still within one write unit (limits that need more digits do not fit).
        limits: rateLimitSettingsSchema.parse({ general: [{ limit: 36 ** 4 - 1, windowSeconds: 3600 }] }),
        processes: kind === 'ledger-shared' ? 1 : consumers,
        tokenId: 'throughput',
      });
    }
    const result = await measureThroughput(contender, consumers, THROUGHPUT_MS);
    destroy();
    row.limiter ??= contender.name;
    row[`grants/s, ${consumers} consumer${consumers > 1 ? 's' : ''}`] = Math.round(result.grantsPerSecond);
    row[`writes/grant @${consumers}`] = result.grants ? counter.writes() / result.grants : 0;
    row[`failed @${consumers}`] = result.failures;
  }
  return row;
}

export async function run(): Promise<BenchTable[]> {
  const dynamo = await startDynalite();
  try {
    const quota: BenchRow[] = [];
    for (const [index, scenario] of (['steady', 'bursts'] as const).entries())
      for (const kind of ['ledger', 'ledger-faulty', 'flexible'] as const)
        quota.push(await quotaRow(dynamo, scenario, kind, 100 + index));
    const items: BenchRow[] = [];
    for (const [name, input] of ITEM_CASES) {
      const limits = rateLimitSettingsSchema.parse(input);
      const filled = await fillLedgerItem({
        client: dynamo.client,
        tableName: await dynamo.createTable('bench-item'),
        limits,
        hours: 1.1,
      });
      items.push({
        limits: name,
        'bound (bytes, computed)': filled.bound,
        'largest measured (bytes)': filled.largest,
        'write units per write at the bound': Math.ceil(filled.bound / 1024),
      });
    }
    const speed: BenchRow[] = [];
    for (const kind of ['ledger-shared', 'ledger-per-consumer', 'flexible'] as const)
      speed.push(await throughputRow(dynamo, kind));
    return [
      {
        title: `Rate limits 50/60 s + 1000/3600 s on one token, ${HOURS} simulated hours, same dynalite (grant times; vendor = exact sliding windows)`,
        rows: quota,
      },
      {
        title: `Grants per second, real time, in-process (no HTTP), limits out of reach, ${THROUGHPUT_MS / 1000} s per cell`,
        rows: speed,
      },
      {
        title:
          'Ledger item size, through the real codec and a real write to dynalite: a permit of every class asked every second for 1.1 simulated hours, id set full, as many vendor caps as the item keeps',
        rows: items,
      },
    ];
  } finally {
    await dynamo.close();
  }
}
