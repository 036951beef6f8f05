/**
 * Two Regions, one vendor budget (issues 27 and 33), in SIMULATED time: local/regions-sim.ts runs two regional
 * ledgers (the real ledger's rings) on leased shares renewed every 10 s, and early where a poll every 2 s finds the
 * plan moved (lease 30 s), through a lease store with 5 % failed calls and 2 % lost answers; the Regions' DynamoDB
 * clocks 0.5 s apart and each renewer on its Region's, corrected from DynamoDB's answers (within 250 ms: with the
 * Regions' half second, the 1 s bound); against the same asks served by ONE ledger holding the whole budget (a
 * single Region's broker). The vendor's general limits, 50 per 60 s and 1000 per 3600 s.
 *
 * Rows: active/passive; active/active with the demand moving between the Regions (a sine of an hour); a Region
 * lost (its services fail over to the other; 20 runs, the loss at random moments against the renewals); a
 * 10-minute partition of one Region from the lease store (its services keep asking it). Two demand levels:
 * 1.2 asks/s (far above the hour limit's 0.28/s) and 0.35/s (just above it, bursting). And one row of a learned
 * class asked for in both Regions (half the asks, the demand moving between the Regions), learned 10 per 60 s after
 * 5 minutes: its requests served against one ledger's (simulated, as every row).
 */
import type { BenchRow, BenchTable } from '../local/format-table.js';
import {
  type Ask,
  generateAsks,
  type LearnedClassPlan,
  type Region,
  type RegionsSimOptions,
  type RegionsSimResult,
  simulateRegions,
  singleLedger,
  singleLedgerServed,
} from '../local/regions-sim.js';
import { writeChart } from '../local/svg-chart.js';
import { useOverTime } from '../local/use-over-time.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { type Budget, CLOCK_BOUND_MS, tailOf } from '../shared/regions/lease.js';
import { seededRandom } from '../test/support/sandbox-http.js';
import { type LossSeries, lossChart } from './regions-chart.js';

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;
const LIMITS = rateLimitSettingsSchema.parse({});
const DURATION_MS = 3 * HOUR_MS;
const LOSS_AT = HOUR_MS;
const LOSS_RUNS = 20;
const STORE = { failure: 0.05, lostAnswer: 0.02, latencyMs: [20, 200] as const };
const CLOCKS = { home: CLOCK_BOUND_MS / 4, peer: -CLOCK_BOUND_MS / 4 };

interface Outcome {
  result: RegionsSimResult;
  asks: Ask[];
  single: number[];
  options: RegionsSimOptions;
}

function simulate(options: RegionsSimOptions): Outcome {
  const asks = generateAsks(options);
  return { result: simulateRegions(options, asks), asks, single: singleLedgerServed(asks, LIMITS), options };
}

const served = (o: Outcome) => o.result.served.home + o.result.served.peer;
const between = (times: readonly number[], from: number, to: number) =>
  times.filter((t) => t >= from && t < to).length;
const percent = (x: number) => `${(100 * x).toFixed(1)} %`;
const writesPerHour = (o: Outcome) =>
  ((o.result.storeWrites.home + o.result.storeWrites.peer) / (o.options.durationMs / HOUR_MS)).toFixed(0);

function options(
  seed: number,
  rate: number,
  homePart: (t: number) => number,
  regions: Partial<Record<Region, object>> = {},
): RegionsSimOptions {
  return {
    random: seededRandom(seed),
    durationMs: DURATION_MS,
    limits: LIMITS,
    demand: (region, t) => rate * (region === 'home' ? homePart(t) : 1 - homePart(t)),
    regions: {
      home: { clockOffsetMs: CLOCKS.home, ...regions.home },
      peer: { clockOffsetMs: CLOCKS.peer, ...regions.peer },
    },
    store: STORE,
  };
}

/** Quota use vs the single ledger in the hour from `from` (the loss, the partition), by send time. */
const hourUse = (o: Outcome, from: number) =>
  between(o.result.sendTimes, from, from + HOUR_MS) / Math.max(1, between(o.single, from, from + HOUR_MS));

function plainRow(name: string, o: Outcome, eventAt?: number): BenchRow {
  return {
    scenario: name,
    served: served(o),
    'single ledger': o.single.length,
    'quota use vs single': percent(served(o) / o.single.length),
    'in the hour from the event': eventAt === undefined ? '-' : percent(hourUse(o, eventAt)),
    'to full minute budget after loss': '-',
    'hour held back after lapse (bound)': '-',
    'lease writes per key per hour': writesPerHour(o),
    "429s (vendor's check)": o.result.vendor.rejected,
  };
}

const lostAt = (o: Outcome) => o.options.regions.peer.lostAt ?? LOSS_AT;

/** When the survivor (home) held the whole minute budget again after the peer was lost, in s after the loss. */
function toFullMinute(o: Outcome): number {
  const minute = o.result.budgets[0]?.key ?? '';
  const full = o.result.adoptions.find(
    (a) => a.region === 'home' && a.t >= lostAt(o) && a.shares[minute] === o.result.budgets[0]?.limit,
  );
  return full ? (full.t - lostAt(o)) / 1000 : Number.POSITIVE_INFINITY;
}

/** The run's last 2 minutes before the loss and 3 after: shares and the minute's use, for the chart. */
function lossSeries(o: Outcome): LossSeries {
  const at = lostAt(o);
  const from = at - 2 * MINUTE_MS;
  const to = at + 3 * MINUTE_MS;
  const minute = o.result.budgets[0] as Budget;
  const seconds = (t: number) => Math.round((t - at) / 100) / 10;
  const shares: LossSeries['shares'] = [];
  for (const region of ['home', 'peer'] as const) {
    const own = o.result.adoptions.filter((a) => a.region === region);
    const before = own.filter((a) => a.t < from).at(-1);
    for (const a of [
      ...(before ? [{ ...before, t: from }] : []),
      ...own.filter((a) => a.t >= from && a.t <= to),
    ])
      shares.push({ seconds: seconds(a.t), region, share: a.shares[minute.key] ?? 0 });
    shares.push({
      seconds: seconds(to),
      region,
      share: shares.filter((x) => x.region === region).at(-1)?.share ?? 0,
    });
  }
  const counts = (times: readonly number[]) => times.map((time) => ({ time: time - from, count: 1 }));
  const use = (name: string, times: readonly number[]) =>
    useOverTime(counts(times), minute, 0, to - from, 1000).map((p) => ({
      ...p,
      seconds: p.seconds - (at - from) / 1000,
      series: name,
    }));
  return {
    shares,
    use: [
      ...use('home (survivor)', o.result.grantTimes.home),
      ...use('peer (lost)', o.result.grantTimes.peer),
      ...use('both Regions', [...o.result.grantTimes.home, ...o.result.grantTimes.peer]),
      ...use('one ledger, same asks', o.single),
    ],
  };
}

function lossRow(name: string, rate: number): BenchRow {
  const runs = Array.from({ length: LOSS_RUNS }, (_, i) =>
    simulate(options(100 + i, rate, () => 0.5, { peer: { lostAt: LOSS_AT + ((i * 9973) % 10_000) } })),
  );
  const times = runs.map(toFullMinute).sort((a, b) => a - b);
  // The hour budget the survivor held back for the lost Region beyond the grants it really had in the span, at
  // each of its renewals from the lapse of the lost Region's lease until an hour after the loss (the hour ring's
  // tail lasts that long)...
  const lastRecord = (o: Outcome) =>
    o.result.written.filter((w) => w.record.region === 'peer' && w.t < lostAt(o)).at(-1)?.record;
  const heldBack = runs.map((o) => {
    const hour = o.result.budgets[1] as Budget;
    const peer = o.result.grantTimes.peer;
    const lapse = (lastRecord(o)?.leaseUntil ?? 0) + CLOCK_BOUND_MS - CLOCKS.home;
    return Math.max(
      0,
      ...o.result.adoptions
        .filter(
          (a) => a.region === 'home' && a.mode === 'replace' && a.t >= lapse && a.t < lostAt(o) + HOUR_MS,
        )
        // At the moment the renewal planned that share: the lost Region's grants leave the span meanwhile.
        .map(
          (a) =>
            hour.limit -
            between(peer, a.plannedAt - hour.spanMs, a.plannedAt + 1) -
            (a.shares[hour.key] ?? 0),
        ),
    );
  });
  // ...against its bound: the tail of the last record (what the lost Region could have granted between that
  // snapshot and its fence), plus the snapshot's slot rounding: a slot counts in full while any moment of it, moved
  // by the clock bound, may be in the span, so at the span's start up to two adjacent hour slots (the one it cuts,
  // and the one before when the cut is within the clock bound of their border): its fullest such pair.
  const bounds = runs.map((o) => {
    const last = lastRecord(o);
    const hour = o.result.budgets[1] as Budget;
    const ring = last?.snapshot.rings[hour.key] ?? { slotMs: 1, slots: [] };
    const count = (start: number) => ring.slots.find((slot) => slot.start === start)?.count ?? 0;
    const pairs = ring.slots.map((slot) => slot.count + count(slot.start - ring.slotMs));
    return last ? tailOf(last, hour) + Math.max(0, ...pairs) : 0;
  });
  const worst = heldBack.indexOf(Math.max(...heldBack));
  const worstBound = bounds[worst];
  const within = heldBack.filter((x, i) => x <= (bounds[i] ?? 0)).length;
  const total = (f: (o: Outcome) => number) => runs.reduce((sum, o) => sum + f(o), 0);
  return {
    scenario: `${name} (${LOSS_RUNS} runs)`,
    served: total(served),
    'single ledger': total((o) => o.single.length),
    'quota use vs single': percent(total(served) / total((o) => o.single.length)),
    'in the hour from the event': percent(
      total((o) => between(o.result.sendTimes, lostAt(o), lostAt(o) + HOUR_MS)) /
        total((o) => between(o.single, lostAt(o), lostAt(o) + HOUR_MS)),
    ),
    'to full minute budget after loss': `median ${times[LOSS_RUNS >> 1]?.toFixed(1)} s, max ${times.at(-1)?.toFixed(1)} s`,
    'hour held back after lapse (bound)': `max ${Math.max(...heldBack)} (${worstBound}), ${within}/${LOSS_RUNS} within`,
    'lease writes per key per hour': writesPerHour(runs[0] as Outcome),
    "429s (vendor's check)": total((o) => o.result.vendor.rejected),
  };
}

/**
 * A learned class in both Regions: half of 0.35 asks/s (10.5 a minute, the class's 10 per 60 s binding), the
 * demand moving between the Regions as in the shifting rows, the class taught 10 per 60 s by a report in home after
 * 5 minutes (the probe until then). Served: the class's requests, against one ledger's on the same asks (its view
 * learned at the same moment, seeded the same way); the vendor's check: the class's limit and the general ones.
 */
function learnedRow(): BenchRow {
  const knownAt = 5 * MINUTE_MS;
  const limits = rateLimitSettingsSchema.parse({ classes: { reports: [] } });
  const learned: LearnedClassPlan = {
    name: 'reports',
    limits: [{ limit: 10, windowSeconds: 60 }],
    part: 0.5,
    knownAt,
    learner: 'home',
    answerLagMs: 1000,
  };
  const opts: RegionsSimOptions = {
    ...options(5, 0.35, (t) => 0.5 + 0.45 * Math.sin((2 * Math.PI * t) / HOUR_MS)),
    limits,
    learned,
  };
  const asks = generateAsks(opts);
  const result = simulateRegions(opts, asks);
  const single = singleLedger(asks, limits, learned).classSendTimes;
  const mine = result.classSendTimes;
  return {
    scenario: 'learned class 10/60 s in both Regions, its requests',
    served: mine.length,
    'single ledger': single.length,
    'quota use vs single': percent(mine.length / single.length),
    'in the hour from the event': percent(
      between(mine, knownAt, knownAt + HOUR_MS) / between(single, knownAt, knownAt + HOUR_MS),
    ),
    'to full minute budget after loss': '-',
    'hour held back after lapse (bound)': '-',
    'lease writes per key per hour': ((result.storeWrites.home + result.storeWrites.peer) / 3).toFixed(0),
    "429s (vendor's check)": result.vendor.rejected + result.classVendor.rejected,
  };
}

export async function run(): Promise<BenchTable[]> {
  const rows: BenchRow[] = [];
  for (const [level, rate] of [
    ['1.2 asks/s', 1.2],
    ['0.35 asks/s', 0.35],
  ] as const) {
    rows.push(plainRow(`active/passive, ${level}`, simulate(options(1, rate, () => 1))));
    rows.push(
      plainRow(
        `active/active, demand shifting, ${level}`,
        simulate(options(2, rate, (t) => 0.5 + 0.45 * Math.sin((2 * Math.PI * t) / HOUR_MS))),
      ),
    );
    if (rate < 1)
      rows.push(
        plainRow(
          `(the same, targets as fractions of the limit), ${level}`,
          simulate({
            ...options(2, rate, (t) => 0.5 + 0.45 * Math.sin((2 * Math.PI * t) / HOUR_MS)),
            targets: 'fractions',
          }),
        ),
      );
    rows.push(lossRow(`a Region lost at 1 h, ${level}`, rate));
    rows.push(
      plainRow(
        `10-minute partition at 1 h, ${level}`,
        simulate(
          options(3, rate, () => 0.5, {
            peer: { partitions: [{ from: LOSS_AT, to: LOSS_AT + 10 * MINUTE_MS }] },
          }),
        ),
        LOSS_AT,
      ),
    );
  }
  // Under the hour limit, the minute limit binding in bursts that alternate between the Regions: 0.02 asks/s each,
  // and a minute of 2 asks/s every 8 minutes, in turn. What a bursting Region needs is the other's idle share within
  // seconds: its demand over the last RENEW_MS shows at its next poll, the other gives its share back at its own,
  // and the bursting one takes it at the poll after (lease.ts renewsEarly).

  const burst = (t: number) => Math.floor(t / 60_000) % 8 === 0;
  const turn = (t: number): Region => (Math.floor(t / 480_000) % 2 === 0 ? 'home' : 'peer');
  rows.push(
    plainRow(
      'active/active, bursts in turn (the minute limit binds)',
      simulate({
        ...options(4, 0, () => 0.5),
        demand: (region, t) => (burst(t) && turn(t) === region ? 2 : 0.02),
      }),
    ),
  );
  rows.push(learnedRow());
  // The chart: a loss before the hour limit binds (0.9 asks/s for 10 minutes is 540 of the hour's 1000), so the
  // minute's use shows what the survivor's share lets through.
  const CHART_LOSS_AT = 10 * MINUTE_MS + 4321;
  const chartRun = simulate({
    ...options(7, 0.9, () => 0.5, { peer: { lostAt: CHART_LOSS_AT } }),
    durationMs: 16 * MINUTE_MS,
  });
  const chart = await writeChart(
    'regions-loss',
    lossChart(
      [
        'A Region lost (npm run bench -- regions): 0.9 asks/s split evenly, the peer lost after 10 minutes',
        'leased shares, lease 30 s renewed every 10 s (early on a poll), DynamoDB clocks 0.5 s apart, 5 % failed lease-store calls; simulated time',
      ],
      lossSeries(chartRun),
    ),
  );
  return [
    {
      title: 'Two Regions on leased shares vs one ledger (simulated, 3 h each)',
      rows,
      footnote: `Chart (a loss: both Regions' minute shares and the minute's use around it): ${chart}`,
    },
  ];
}
