/**
 * The rate ledger and rate-limiter-flexible on the real clock, where the minute limit binds: 20 consumers of
 * one token with demand far above 50/60 s + 1000/3600 s, for a little over two vendor minutes, both contenders
 * at the same time on one dynalite (127.0.0.1) through the real DynamoDB client. Unlike the simulated table of
 * ledger.bench.ts, DynamoDB takes real time here, and the ledger's minute margin (3 s by default) is what
 * decides how much of the quota it uses. In-process calls (no HTTP, no SigV4). `npm run bench -- realtime`.
 */

import type { BenchRow, BenchTable } from '../local/format-table.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { systemClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { startDynalite } from '../test/support/dynalite.js';
import {
  countDynamoCalls,
  idealGrantTimes,
  maxInAnySpan,
  seededRandom,
} from '../test/support/ledger-harness.js';
import {
  type Contender,
  createFlexibleTable,
  flexibleClient,
  flexibleContender,
  ledgerContender,
} from './ledger/contenders.js';
import { runRealTime } from './ledger/realtime.js';
import { slidingVendorAccepted } from './ledger/simulation.js';

const CONSUMERS = 20;
/** Long enough for the ledger's third minute to open (at about 2 × 63 s); BENCH_REALTIME_SECONDS changes it. */
const DURATION_MS = Number(process.env.BENCH_REALTIME_SECONDS || 140) * 1000;
/** The first permit of the third vendor minute: when the vendor accepts it measures two whole minute cycles. */
const MARK = 2 * 50 + 1;
const VENDOR_LIMITS = [
  { limit: 50, windowMs: 60_000 },
  { limit: 1000, windowMs: 3600_000 },
];

async function row(
  contender: Contender,
  writes: () => number,
  seed: number,
  note: string,
): Promise<BenchRow> {
  const result = await runRealTime(contender, CONSUMERS, DURATION_MS, seededRandom(seed));
  const granted = result.grants.reduce((sum, g) => sum + g.count, 0);
  const accepted = slidingVendorAccepted(result.grants, VENDOR_LIMITS);
  const ideal = idealGrantTimes(VENDOR_LIMITS, result.start, result.end);
  const seconds = (t: number | undefined) => (t === undefined ? undefined : (t - result.start) / 1000);
  const markAt = seconds(accepted[MARK - 1]);
  const bestMarkAt = seconds(ideal[MARK - 1]) ?? Number.NaN;
  return {
    limiter: contender.name,
    'permits asked': result.asked,
    'permits granted': granted,
    'max in any 60 s': maxInAnySpan(result.grants, 60_000),
    'vendor would refuse': granted - accepted.length,
    'vendor accepts / best possible in the run': `${accepted.length} / ${ideal.length}`,
    [`s to the ${MARK}st accepted`]: markAt ?? `not in ${DURATION_MS / 1000} s`,
    [`best possible s to the ${MARK}st`]: bestMarkAt,
    [`pace (${MARK}st accepted: best / actual)`]:
      markAt === undefined
        ? `< ${((bestMarkAt / (DURATION_MS / 1000)) * 100).toFixed(1)} %`
        : `${((bestMarkAt / markAt) * 100).toFixed(1)} %`,
    'writes per granted permit': granted ? writes() / granted : 0,
    errors: result.failures,
    setup: note,
  };
}

export async function run(): Promise<BenchTable[]> {
  const dynamo = await startDynalite();
  const ledgerClients = Array.from({ length: CONSUMERS }, () =>
    createDynamoDbClient({ endpoint: dynamo.endpoint }),
  );
  const flexible = flexibleClient(dynamo.endpoint);
  try {
    const ledgerCounters = ledgerClients.map((client) => countDynamoCalls(client));
    const tableName = await dynamo.createTable('bench-realtime-ledger');
    const instances = ledgerClients.map((client, i) =>
      ledgerContender({
        name: `instance ${i}`,
        client,
        tableName,
        clock: systemClock,
        limits: rateLimitSettingsSchema.parse({}),
        processes: 1,
        tokenId: 'realtime-token',
      }),
    );
    const ledger: Contender = {
      name: `DynamoRateLedger, ${CONSUMERS} instances`,
      acquire: (consumer, count) => (instances[consumer % instances.length] as Contender).acquire(0, count),
    };
    await createFlexibleTable(flexible, 'bench-realtime-flexible');
    const flexibleWrites = countDynamoCalls(flexible).writes;
    const union = flexibleContender({
      name: 'rate-limiter-flexible: RateLimiterDynamo ×2 + Union, reward on rejection',
      client: flexible,
      tableName: 'bench-realtime-flexible',
      limits: [
        { points: 50, duration: 60 },
        { points: 1000, duration: 3600 },
      ],
      key: 'realtime-token',
    });
    const rows = await Promise.all([
      row(
        ledger,
        () => ledgerCounters.reduce((sum, c) => sum + c.writes(), 0),
        201,
        'default settings (3 s margin); one instance (own ledger, own DynamoDB client) per consumer',
      ),
      row(
        union,
        flexibleWrites,
        202,
        'fixed windows from the first consume; the points of a rejected request given back to both limiters (reward)',
      ),
    ]);
    return [
      {
        title: `Rate limits 50/60 s + 1000/3600 s on one token, REAL time: ${CONSUMERS} consumers asking 1..5 permits, ${DURATION_MS / 1000} s, the minute limit binds; in-process (no HTTP), both contenders at once on one dynalite; a grant counts when its answer reaches the consumer; vendor = exact sliding windows`,
        rows,
        footnote: `pace: how soon the vendor accepts the first permit of the third minute (the ${MARK}st), against an exact scheduler's 120 s (50 at once, 50 more each 60 s): the share of the quota used over two whole minute cycles, whatever the run's length. It counts accepted permits only: the refused ones are vendor 429s on top (calls that fail and must be retried). The ledger counts a minute as 60 s + its 3 s margin, so it grants 50 per 63 s or a little more (at most 95 %); rate-limiter-flexible's fixed windows grant up to 100 within a sliding 60 s across a window edge and the vendor refuses the excess. "in the run" depends on where the run ends (a short run holds whole vendor minutes and part of the ledger's).`,
      },
    ];
  } finally {
    for (const client of ledgerClients) client.destroy();
    flexible.destroy();
    await dynamo.close();
  }
}
