/**
 * The rate ledger beside rate-limiter-flexible's RateLimiterDynamo (two of them in a RateLimiterUnion, for
 * 50 per minute and 1000 per hour, with a rejected request's points given back by `reward`, as its
 * documentation has it), on the same dynalite, through the real DynamoDB client, with writes counted at each
 * client. Every call is in-process (no HTTP, no SigV4).
 * - SIMULATED time (ManualClock; Date.now follows it while rate-limiter-flexible runs; DynamoDB answers take no
 *   simulated time): 3 hours of two demand patterns; the most granted in any 60 s and 3600 s span, the permits
 *   an exact sliding-window vendor would refuse, DynamoDB writes per granted permit, and the share of the quota
 *   used (permits the vendor accepts / the most any scheduler could get through in the same 3 hours, see
 *   idealGrantTimes). Here the hour limit binds; ledger-realtime.bench.ts has the minute limit binding on the
 *   real clock. For the ledger, the item is measured around every write (item-sizes.ts): the write units each
 *   write is charged and the largest item.
 * - The same, SIMULATED, with four request classes (class-rows.ts): general and class requests mixed, quota use
 *   and vendor refusals per scope, writes and write units, without and with DynamoDB faults.
 * - REAL time: grants per second at 1, 8 and 32 callers, limits out of reach: one process batching concurrent
 *   callers, and one instance per caller serving one request at a time (what Lambda instances do).
 */

import type { BenchRow, BenchTable } from '../local/format-table.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock, systemClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { startDynalite } from '../test/support/dynalite.js';
import {
  countDynamoCalls,
  fillLedgerItem,
  idealGrantTimes,
  maxInAnySpan,
  seededRandom,
} from '../test/support/ledger-harness.js';
import { CLASS_SETTINGS, CLASSES, classRun, GOAL_USED, GOAL_WRITES_PER_PERMIT } from './ledger/class-rows.js';
import {
  type Contender,
  createFlexibleTable,
  flexibleClient,
  flexibleContender,
  ledgerContender,
} from './ledger/contenders.js';
import {
  type Dynamo,
  FAULTS_LABEL,
  itemColumns,
  LEDGER_PROCESSES,
  ledgerRun,
  percent,
} from './ledger/ledger-run.js';
import { type Scenario, simulate, slidingVendorRejections } from './ledger/simulation.js';
import { measureThroughput } from './ledger/throughput.js';

/** Simulated hours of each quota run; BENCH_LEDGER_HOURS changes it (a quick look: 0.2). */
const HOURS = Number(process.env.BENCH_LEDGER_HOURS || 3);
const VENDOR_LIMITS = [
  { limit: 50, windowMs: 60_000 },
  { limit: 1000, windowMs: 3600_000 },
];
const FLEXIBLE_LIMITS = [
  { points: 50, duration: 60 },
  { points: 1000, duration: 3600 },
];
const CONCURRENCY = [1, 8, 32];
const THROUGHPUT_MS = 2000;
/** The default general limits with no class, with two classes, and with the four classes of the class rows. */
const ITEM_CASES: [string, unknown][] = [
  ['50/60 s + 1000/3600 s, no class', {}],
  [
    '50/60 s + 1000/3600 s + reports 10/60 s + rebalancing 20/3600 s',
    {
      classes: {
        reports: [{ limit: 10, windowSeconds: 60 }],
        rebalancing: [{ limit: 20, windowSeconds: 3600 }],
      },
    },
  ],
  [`50/60 s + 1000/3600 s + ${CLASSES.join(', ')} each 25/60 s + 500/3600 s`, CLASS_SETTINGS],
];

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
  let items: (granted: number) => Record<string, number> = () => ({});
  if (kind !== 'flexible') {
    const run = await ledgerRun({
      dynamo,
      faulty: kind === 'ledger-faulty',
      limits: rateLimitSettingsSchema.parse({}),
      clock,
      seed,
      name:
        kind === 'ledger'
          ? `DynamoRateLedger, ${LEDGER_PROCESSES} processes`
          : `DynamoRateLedger, ${LEDGER_PROCESSES} processes, ${FAULTS_LABEL}`,
    });
    ({ contender, writes, destroy } = run);
    items = (granted) => itemColumns(run.sizes(), granted);
  } else {
    const client = flexibleClient(dynamo.endpoint);
    const tableName = `bench-flexible-${scenario}-${seed}`;
    await createFlexibleTable(client, tableName);
    writes = countDynamoCalls(client).writes;
    destroy = () => client.destroy();
    contender = flexibleContender({
      name: 'rate-limiter-flexible: RateLimiterDynamo ×2 + Union, reward on rejection',
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
  const used = (granted - refused) / allowed;
  const perPermit = granted ? writes() / granted : 0;
  const columns = items(granted);
  const misses = [
    ...(used < GOAL_USED ? [`${percent(used)} used`] : []),
    ...(perPermit > GOAL_WRITES_PER_PERMIT ? [`${perPermit.toFixed(3)} writes per permit`] : []),
    ...(columns['writes over 1 KB'] ? [`${columns['writes over 1 KB']} writes over 1 KB`] : []),
    ...(refused > 0 ? [`${refused} refused by the vendor`] : []),
  ];
  return {
    demand: scenario,
    limiter: contender.name,
    'permits asked': result.asked,
    'permits granted': granted,
    'grants (answers)': result.grants.length,
    'max in any 60 s': maxInAnySpan(result.grants, 60_000),
    'max in any 3600 s': maxInAnySpan(result.grants, 3600_000),
    'vendor would refuse': refused,
    'DynamoDB writes': writes(),
    'writes per granted permit': perPermit,
    'quota used': percent(used),
    ...columns,
    errors: result.failures,
    ...(kind === 'flexible' ? {} : { goals: misses.length === 0 ? 'met' : `NOT MET: ${misses.join(', ')}` }),
  };
}

/**
 * `batched`: one ledger in one process answers all callers at once, so concurrent asks share one write: a
 * Lambda instance never sees this (it serves one request at a time). `instances`: one ledger and one DynamoDB
 * client per caller, each asking again only when answered, as N Lambda instances would. rate-limiter-flexible
 * is set up the `instances` way too (it keeps nothing in memory to batch).
 */
async function throughputRow(
  dynamo: Dynamo,
  kind: 'ledger-batched' | 'ledger-instances' | 'flexible-instances',
): Promise<BenchRow> {
  const row: BenchRow = {};
  for (const callers of CONCURRENCY) {
    const clients: { destroy(): void }[] = [];
    const writeCounters: (() => number)[] = [];
    let name: string;
    let contender: Contender;
    if (kind === 'flexible-instances') {
      const tableName = `bench-flexible-throughput-${callers}`;
      const huge = FLEXIBLE_LIMITS.map((l) => ({ ...l, points: 1e9 }));
      const instances: Contender[] = [];
      for (let i = 0; i < callers; i++) {
        const client = flexibleClient(dynamo.endpoint);
        if (i === 0) await createFlexibleTable(client, tableName);
        clients.push(client);
        writeCounters.push(countDynamoCalls(client).writes);
        instances.push(flexibleContender({ name: '', client, tableName, limits: huge, key: 'k' }));
      }
      name = 'rate-limiter-flexible (RateLimiterDynamo ×2 + Union), one instance per caller';
      contender = { name, acquire: (caller, count) => (instances[caller] as Contender).acquire(0, count) };
    } else {
      const tableName = await dynamo.createTable('bench-throughput');
      // Out of reach of a 2 s run, and still within one write unit (limits that need more digits do not fit).
      const limits = rateLimitSettingsSchema.parse({
        general: [{ limit: 36 ** 4 - 1, windowSeconds: 3600 }],
      });
      const instances: Contender[] = [];
      for (let i = 0; i < (kind === 'ledger-batched' ? 1 : callers); i++) {
        const client = createDynamoDbClient({ endpoint: dynamo.endpoint });
        clients.push(client);
        writeCounters.push(countDynamoCalls(client).writes);
        instances.push(
          ledgerContender({
            name: '',
            client,
            tableName,
            clock: systemClock,
            limits,
            processes: 1,
            tokenId: 'throughput',
          }),
        );
      }
      name =
        kind === 'ledger-batched'
          ? 'DynamoRateLedger, ONE process batching concurrent callers (not what Lambda sees)'
          : 'DynamoRateLedger, one instance per caller, one request at a time (as on Lambda)';
      contender = {
        name,
        acquire: (caller, count) => (instances[caller % instances.length] as Contender).acquire(0, count),
      };
    }
    const result = await measureThroughput(contender, callers, THROUGHPUT_MS);
    for (const client of clients) client.destroy();
    const writes = writeCounters.reduce((sum, w) => sum + w(), 0);
    row.limiter ??= name;
    row[`grants/s, ${callers} caller${callers > 1 ? 's' : ''}`] = Math.round(result.grantsPerSecond);
    row[`writes/grant @${callers}`] = result.grants ? writes / result.grants : 0;
    row[`failed @${callers}`] = result.failures;
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
    const classSummaries: BenchRow[] = [];
    const classScopes: BenchRow[] = [];
    for (const [index, scenario] of (['steady', 'bursts', 'one-class-busy'] as const).entries())
      for (const faulty of [false, true]) {
        const { summary, scopes } = await classRun(dynamo, scenario, faulty, 200 + index, HOURS);
        classSummaries.push(summary);
        classScopes.push(...scopes);
      }
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
    for (const kind of ['ledger-batched', 'ledger-instances', 'flexible-instances'] as const)
      speed.push(await throughputRow(dynamo, kind));
    return [
      {
        title: `Rate limits 50/60 s + 1000/3600 s on one token, SIMULATED time: ${HOURS} simulated hours (DynamoDB takes no simulated time; the hour limit binds), in-process (no HTTP), same dynalite (grant times; vendor = exact sliding windows)`,
        rows: quota,
        footnote:
          "DynamoDB writes: every write attempt sent (SDK retries, throttled ones included). Ledger only: writes reaching DynamoDB (charged: refused conditions, whether another process wrote first or a re-sent copy of an applied write, and writes whose answer was lost included; throttles and 500s not), with the item measured around each (item-sizes.ts) and write units by the larger of before and after. goals: >= 97 % used, <= 1 write per granted permit, 0 writes over 1 KB, 0 vendor refusals. rate-limiter-flexible: two RateLimiterDynamo (fixed windows from the first consume) in a RateLimiterUnion, and on a rejection the request's points given back to both limiters with reward() (the union consumes from every limiter, the rejecting one included); its writes include those rewards. Its RateLimiterQueue is not used: it takes one limiter (it reads get() and points, which a union lacks) and queues in one process only.",
      },
      {
        title: `Four request classes (${CLASSES.join(', ')}: 25/60 s + 500/3600 s each) beside the general 50/60 s + 1000/3600 s, SIMULATED time: ${HOURS} simulated hours, ${LEDGER_PROCESSES} ledger processes, in-process (no HTTP), dynalite; one row per run`,
        rows: classSummaries,
        footnote: `Demand as in the table above, each consumer asking for one scope in turn (general, ${CLASSES.join(', ')}; a class permit counts against its class and the general limits); one-class-busy: 17 consumers of ${CLASSES[0]} as in steady, 3 trickling (general, ${CLASSES[1]}, ${CLASSES[2]}). Item format 2 (packed) is what the settings get by themselves; release 668d70e refuses these settings (its item would not fit one write unit), so it has no such rows. goals: >= 97 % used of each binding limit (next table), <= 1 write per granted permit, 0 writes over 1 KB, 0 vendor refusals.`,
      },
      {
        title: `The same runs per scope: the permits counted against each scope's limits, SIMULATED time (${HOURS} h), in-process (no HTTP); vendor = exact sliding windows of every limit`,
        rows: classScopes,
        footnote:
          "binds: the demand asks more of these limits than they allow (steady and bursts: the general limits, whose share each class gets; one-class-busy: the busy class's). quota used: the permits of the scope the vendor accepts over the most any scheduler could get through these limits alone in the run (idealGrantTimes): for a limit that does not bind it says how much of it the demand took, not how well the ledger did.",
      },
      {
        title: `Grants per second, REAL time, in-process (no HTTP), dynalite on 127.0.0.1, limits out of reach, ${THROUGHPUT_MS / 1000} s per cell; a caller asks again when answered`,
        rows: speed,
        footnote:
          'ONE process batching: one DynamoRateLedger answers every caller, so concurrent asks share a write; a Lambda instance serves one request at a time and never sees this. One instance per caller: its own ledger and DynamoDB client, asking again only when answered, as that many Lambda instances would (the rows to read for Lambda).',
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
