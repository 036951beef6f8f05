/**
 * Reservations (`rateLimits.reservations`) against first come, first served on the same demand: one reserved
 * consumer (`order-service`) asking 1 permit every 3 s (20 a minute, steady), and 19 greedy batch consumers
 * that ask for 1..5 whenever they can (waiting the retry hint when denied, up to 0.5 s after a grant). Each
 * consumer has its own DynamoRateLedger (as its own Lambda instance would), on one dynalite, through the real
 * DynamoDB client. SIMULATED time (ManualClock; DynamoDB answers take no simulated time), in-process (no HTTP).
 * 15 simulated minutes: the minute limit binds (20 a minute for an hour would be 1200, over the hour's 1000 by
 * itself: no reservation can promise that, and the validation refuses reserving more than 90 % of an hour).
 * The reserved consumer's permit wait is from its scheduled moment to its grant.
 */

import type { BenchRow, BenchTable } from '../local/format-table.js';
import { reservationFor } from '../local/soak.js';
import { percentile } from '../local/soak-report.js';
import { writeChart } from '../local/svg-chart.js';
import { useOverTime } from '../local/use-over-time.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, LedgerUnavailableError } from '../shared/ledger/index.js';
import { startDynalite } from '../test/support/dynalite.js';
import {
  idealGrantTimes,
  maxInAnySpan,
  seededRandom,
  type TimedCount,
} from '../test/support/ledger-harness.js';
import { slidingVendorRejections } from './ledger/simulation.js';
import { type ReservationsCaseSeries, reservationsChart } from './reservations-chart.js';

const MINUTES = 15;
const GREEDY = 19;
const RESERVED = 'order-service';
const VENDOR_LIMITS = [
  { limit: 50, windowMs: 60_000 },
  { limit: 1000, windowMs: 3600_000 },
];

type Dynamo = Awaited<ReturnType<typeof startDynalite>>;

interface Case {
  name: string;
  /** The reserved consumer's reservation a minute (none: first come, first served). */
  reservation: number | undefined;
  /** Its permits a minute (0: idle). */
  rate: number;
}

/** The ledger's default margin: a minute's grants are counted over 60 s plus it. */
const MARGIN_S = rateLimitSettingsSchema.parse({}).marginSeconds;
/**
 * A reservation is counted like the limit it is a share of: over the window plus the margin (63 s for a
 * minute), so a steady 20 a minute needs 20 * 63 / 60 = 21, rounded up, plus one for the slot a grant is
 * counted in: 22 (the soak sizes its reservation by the same rule, reservationFor). The 20 row shows what
 * reserving just the rate does.
 */
const SIZED = reservationFor(20, [{ limit: 50, windowSeconds: 60 }], MARGIN_S)['60'] as number;
const CASES: Case[] = [
  { name: 'first come, first served (no reservation)', reservation: undefined, rate: 20 },
  { name: 'reservation 20/min (= the rate)', reservation: 20, rate: 20 },
  { name: `reservation ${SIZED}/min (the rate over ${60 + MARGIN_S} s, +1)`, reservation: SIZED, rate: 20 },
  { name: `reservation ${SIZED}/min, order-service at 10/min`, reservation: SIZED, rate: 10 },
  { name: `reservation ${SIZED}/min, order-service idle`, reservation: SIZED, rate: 0 },
];

/**
 * The mean, over every position of a 60 s window inside the run, of the share of its 50 that was granted (and
 * accepted): unlike the run's total, it does not depend on where the ledger's 63 s cycles fall against the
 * run's end. A grant at x is in the windows starting in (x - 60 s, x].
 */
function meanWindowUse(grants: TimedCount[], start: number, end: number): number {
  const last = end - 60_000;
  let sum = 0;
  for (const g of grants)
    sum += g.count * Math.max(0, Math.min(g.time, last) - Math.max(g.time - 60_000, start));
  return sum / (50 * (last - start));
}

async function caseRow(
  dynamo: Dynamo,
  spec: Case,
  seed: number,
): Promise<{ row: BenchRow; series: ReservationsCaseSeries }> {
  const clock = new ManualClock(Math.floor(Date.now() / 60_000) * 60_000);
  const random = seededRandom(seed);
  const limits = rateLimitSettingsSchema.parse(
    spec.reservation === undefined
      ? {}
      : { reservations: [{ consumer: RESERVED, perWindow: { 60: spec.reservation } }] },
  );
  const client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  const tableName = await dynamo.createTable('bench-reservations');
  const ledger = () => new DynamoRateLedger({ client, tableName, clock, random });
  const start = clock.now();
  const end = start + MINUTES * 60_000;
  const grants: TimedCount[] = [];
  const waits: number[] = [];
  const waitsAt: ReservationsCaseSeries['waits'] = [];
  const wanted = spec.rate * MINUTES;
  let reservedServed = 0;
  let denied429 = 0;
  let failures = 0;
  let stopped = false;

  const reserved = async () => {
    const own = ledger();
    if (spec.rate === 0) return;
    const every = 60_000 / spec.rate;
    for (let due = start; due < end; due += every) {
      await clock.sleep(Math.max(0, due - clock.now()));
      for (;;) {
        try {
          const decision = await own.acquire({
            tokenId: 'bench',
            caller: RESERVED,
            consumer: RESERVED,
            count: 1,
            limits,
          });
          if (decision.granted) {
            grants.push({ time: decision.grantedAt, count: 1 });
            waits.push(decision.grantedAt - due);
            // The chart shows the run's minutes (after them the clock jumps an hour at a time to wake everyone).
            if (decision.grantedAt < end)
              waitsAt.push({ seconds: (due - start) / 1000, waitSeconds: (decision.grantedAt - due) / 1000 });
            if (decision.grantedAt < end) reservedServed++;
            break;
          }
          if (decision.reason !== 'QUOTA') denied429++;
          await clock.sleep(decision.retryAfterMs);
        } catch (error) {
          if (!(error instanceof LedgerUnavailableError)) throw error;
          failures++;
          await clock.sleep(1000);
        }
        if (clock.now() >= end) return;
      }
    }
  };
  const greedy = async (i: number) => {
    const own = ledger();
    while (!stopped) {
      const count = 1 + Math.floor(random() * 5);
      try {
        const decision = await own.acquire({ tokenId: 'bench', caller: `batch-${i}`, count, limits });
        if (decision.granted) {
          grants.push({ time: decision.grantedAt, count });
          await clock.sleep(Math.floor(random() * 500));
        } else await clock.sleep(decision.retryAfterMs);
      } catch (error) {
        if (!(error instanceof LedgerUnavailableError)) throw error;
        failures++;
        await clock.sleep(1000);
      }
    }
  };
  let reservedDone = spec.rate === 0;
  const loops = [
    reserved().then(() => {
      reservedDone = true;
    }),
    ...Array.from({ length: GREEDY }, (_, i) => greedy(i)),
  ];
  // Every consumer still running is asleep: the simulated clock may move.
  const everyoneWaiting = async () => {
    while (clock.pendingSleepers < (reservedDone ? GREEDY : GREEDY + 1))
      await new Promise((r) => setImmediate(r));
  };
  while (clock.now() < end) {
    await everyoneWaiting();
    await clock.advance(Math.max(1, Math.floor(Math.min(random() * 1000, end - clock.now()))));
  }
  await everyoneWaiting();
  stopped = true;
  // Wake whoever sleeps until every loop has seen `stopped` (some may still be waiting for DynamoDB).
  let finished = false;
  const all = Promise.all(loops).then(() => {
    finished = true;
  });
  while (!finished) {
    await clock.advance(3600_000);
    await new Promise((r) => setTimeout(r, 5));
  }
  await all;
  client.destroy();
  const inRun = grants.filter((g) => g.time < end);
  const granted = inRun.reduce((sum, g) => sum + g.count, 0);
  const allowed = idealGrantTimes(VENDOR_LIMITS, start, end).length;
  const refused = slidingVendorRejections(inRun, VENDOR_LIMITS);
  const row = {
    case: spec.name,
    'order-service wanted': wanted,
    'served in time (share of its demand)': wanted
      ? `${((reservedServed / wanted) * 100).toFixed(1)} %`
      : '-',
    'wait p50 (s)': spec.rate ? percentile(waits, 50) / 1000 : '-',
    'wait p99 (s)': spec.rate ? percentile(waits, 99) / 1000 : '-',
    'wait max (s)': spec.rate ? Math.max(0, ...waits) / 1000 : '-',
    'permits granted': granted,
    'max in any 60 s': maxInAnySpan(inRun, 60_000),
    'vendor 429 (exact sliding)': refused,
    'quota used (of exact windows)': `${(((granted - refused) / allowed) * 100).toFixed(1)} %`,
    'mean use of every 60 s window': `${(meanWindowUse(inRun, start, end) * 100).toFixed(1)} %`,
    'denied other than QUOTA': denied429,
    errors: failures,
  };
  const use = useOverTime(inRun, { limit: 50, windowMs: 60_000 }, start, end, 5000);
  return { row, series: { name: spec.name, use, waits: waitsAt } };
}

export async function run(): Promise<BenchTable[]> {
  const dynamo = await startDynalite();
  try {
    const rows: BenchRow[] = [];
    const series: ReservationsCaseSeries[] = [];
    for (const [index, spec] of CASES.entries()) {
      const result = await caseRow(dynamo, spec, 500 + index);
      rows.push(result.row);
      series.push(result.series);
    }
    const chart = await writeChart(
      'reservations',
      reservationsChart(
        [
          'Reservations vs first come, first served (npm run bench -- reservations)',
          `1 reserved consumer at 20/min + ${GREEDY} greedy, 50/60 s + 1000/3600 s, ${MINUTES} simulated minutes`,
        ],
        series,
      ),
    );
    return [
      {
        title: `Reservations vs first come, first served: 50/60 s + 1000/3600 s on one token, 1 reserved consumer + ${GREEDY} greedy batch consumers, each its own ledger instance; SIMULATED time (${MINUTES} simulated minutes), in-process (no HTTP), dynalite`,
        rows,
        footnote: `Wait: from the moment order-service wanted its permit (every 3 s at 20/min) to its grant (it asks for the next one only after; served in time: granted within the 15 minutes). The simulated clock moves in random steps of up to 1 s and a grant is stamped at the end of its step, so a wait under 1 s means granted at the first step after it was due; the real-time figures are the soak's (npm run soak -- reserved). Quota used: permits granted that an exact sliding-window vendor accepts, over the most any scheduler could grant in the same minutes (50 a minute); the ledger counts each minute limit over ${60 + MARGIN_S} s (the ${MARGIN_S} s margin for permits in flight), so it grants 50 per ${60 + MARGIN_S} s when the minute limit binds: the run's total gains or loses a cycle by where its end falls; the mean over every 60 s window does not (at most 60/${60 + MARGIN_S} = ${((60 / (60 + MARGIN_S)) * 100).toFixed(1)} %). Idle rows: what not lending an unused reservation costs.\nChart (use of the minute limit and order-service's waits over time): ${chart}`,
      },
    ];
  } finally {
    await dynamo.close();
  }
}
