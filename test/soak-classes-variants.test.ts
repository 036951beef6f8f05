import { beforeAll, describe, type ExpectStatic, expect, it } from 'vitest';
import {
  CLASSES_SOAK_DEFAULTS,
  type ClassesSoakResult,
  type ClassesSoakSettings,
  type ClassRow,
  runClassesSoak,
} from '../local/soak-classes.js';
import { classRows, idleWithRoom } from '../local/soak-classes-report.js';
import { adoptBoundSeconds, liarHoldBoundSeconds } from '../local/soak-classes-verdict.js';

/**
 * Issue 32's classes soak variants (`npm run soak -- classes --variant NAME`), shortened: each a learned run of the
 * local broker over HTTP + SigV4, 8 consumers (4 per class, greedy) for 20-45 s of real time, two side by side at
 * a time (three pairs). Windows of 5-15 s: the ledger's 0.5 s margin (the full soak's) leaves room for 95 % of a
 * 10 s window, so the use floor below means something; a shorter window (or the suite's 1 s margin) would not.
 *
 * They assert the issue's promises as real time on two cores can hold them (expectKept: the exact ones are the
 * learned-limits property's, P1-P4), each on its own (expect.soft: a run shows every promise it breaks):
 * 1. after learning, at most REAL_TIME_NAMED_429 vendor 429 of a named limit per class, at most one per limit not
 *    yet named (docs/class-limits.md), one per consumer of the class for a limit the vendor lowers mid-window;
 * 2. the classes' use at least REAL_TIME_USE_FLOOR_PCT of what their binding limits allow over the run
 *    (quotaUsedRunPct: a class held back counts as unused; the probe's request counts as used, it fills the
 *    vendor's first window), but for `limit-change`'s raised class after its rise, a figure (see that test);
 * 3. `limit-change`: the time to adopt the raised limit, a figure (P4 is the promise);
 * 4. `liar`: one caller's tight fake holds a class no longer than the window it reported plus margins
 *    (liarHoldBoundSeconds), measured from the vendor's log;
 * 5. `restart`: the token and the learned limits outlive the broker's restart (one login, no return to the probe);
 * 6. the refresher keeps one token with the vendor's clock 30 s behind or 120 s ahead (one login, no vendor 401);
 * 7. no secret in a log.
 * Written before the learning rules were fixed: several are expected to fail on that code.
 */
/** The real-time bounds of expectKept (the exact promises are the property's: see there). */
const REAL_TIME_USE_FLOOR_PCT = 70;
const REAL_TIME_NAMED_429 = 1;

const SHORT: Omit<ClassesSoakSettings, 'variant'> = {
  ...CLASSES_SOAK_DEFAULTS,
  consumers: 8,
  // Two windows of 10 s: enough to learn wrong and to show it in the use, 429s or the probe.
  durationSeconds: 20,
  families: [
    { name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 10, windowSeconds: 10 }] },
    { name: 'rebalancing', pathPrefix: '/rebalancing/', limits: [{ limit: 4, windowSeconds: 10 }] },
  ],
};
/** The consumers of one class (the soak splits them evenly between its families). */
const CONSUMERS_PER_CLASS = (SHORT.consumers ?? 0) / (SHORT.families?.length ?? 1);

const summary = (result: ClassesSoakResult) =>
  JSON.stringify({
    variant: result.settings.variant,
    elapsedSeconds: Number(result.elapsedSeconds.toFixed(1)),
    logins: result.logins,
    vendor401: result.vendor401,
    clientErrors: result.clientErrors,
    rows: result.rows.map((row) => ({
      quota: row.quota,
      served: row.served,
      '429': `${row.vendor429Learning}/${row.vendor429After} (${row.vendor429AfterUnnamed})`,
      usedPct: row.quotaUsedPct,
      usedOfRunPct: row.quotaUsedRunPct,
      learnS: row.learnMs === undefined ? 'never' : row.learnMs / 1000,
      atEnd: row.learnedAtEnd,
      viewChanges: row.viewChanges,
      adoptions: row.adoptions?.map((a) => a.seconds ?? 'never'),
      liar: row.liar && { holdS: row.liar.longestHoldSeconds, releaseS: row.liar.releaseSeconds ?? 'held' },
    })),
  });

const classes = (result: ClassesSoakResult): ClassRow[] =>
  result.rows.filter((row) => row.quota !== 'general');

/**
 * Promises 1, 2 and 7, every row (the general lanes are paced below their limits: only 429s count there), as a
 * real-time run on a 2-core machine can hold them: the exact promises (no 429 of a named limit; 90 % of the
 * capacity once learned) are the learned-limits property's (P1, P3), in simulated time, over 200 runs. Here, in
 * real time, a permit granted before a report reached the ledger and sent after it may meet the limit that report
 * named (one per class in four clean-clone runs), and C1's whole-second reading of the reset and the load leave the
 * use of 10 s windows at 75-100 % (a6dc151: 5-30 %, 12 429s): REAL_TIME_NAMED_429 and REAL_TIME_USE_FLOOR_PCT,
 * the figures printed for the note. A limit not yet named (a second or third window first binding, or a limit the
 * vendor lowers mid-window) may be met by every request in flight before the first answer naming it reaches the
 * ledger (docs/class-limits.md, "A limit not yet named", point 3; the property's P1 allows one per honest caller):
 * one per consumer of the class. A clean clone's run met two on the three-windows variant's 11/15 s. `lowered`: the
 * classes whose limit the vendor lowers in the run's last part; their 429s there are bounded by the caller (every
 * request in flight when the lower limit is named may meet it, named or not: a clean clone's run met two "named").
 */
function expectKept(
  check: ExpectStatic,
  result: ClassesSoakResult,
  useOf: readonly string[],
  lowered: readonly string[] = [],
): void {
  for (const row of result.rows) {
    check.soft(row.served, `${row.quota}: served`).toBeGreaterThan(0);
    // A class whose limit the vendor lowers: the last part's 429s (after the lowering) are its caller's to bound.
    const last = lowered.includes(row.quota) ? row.phases?.at(-1) : undefined;
    check
      .soft(
        row.vendor429After - row.vendor429AfterUnnamed - (last ? last.vendor429 - last.vendor429Unnamed : 0),
        `${row.quota}: vendor 429s after learning by a named limit${last ? ', before the lowering' : ''}`,
      )
      .toBeLessThanOrEqual(REAL_TIME_NAMED_429);
    check
      .soft(
        row.vendor429PerUnnamedLimit,
        `${row.quota}: vendor 429s after learning by one limit not yet named`,
      )
      .toBeLessThanOrEqual(CONSUMERS_PER_CLASS);
    if (useOf.includes(row.quota))
      check
        .soft(row.quotaUsedRunPct, `${row.quota}: % of its limits used over the run`)
        .toBeGreaterThanOrEqual(REAL_TIME_USE_FLOOR_PCT);
  }
  check.soft(result.excesses, 'spans above a vendor limit').toEqual([]);
  check.soft(result.secretsInLogs, 'secrets in the logs').toBe(0);
}

const BOTH = ['reports', 'rebalancing'];

describe('the classes soak variants, measured (no server)', () => {
  it('finds a stretch in which the limits had room and nothing was served, not the waits they explain', () => {
    const limits = [{ limit: 2, windowSeconds: 10 }];
    // Two at 0, the window full until 10 s: served at 10.3 s is a round trip; then none until 40 s is a hold.
    expect(idleWithRoom([0, 0, 10_300, 10_300, 40_000], limits)).toEqual([
      [10_000, 10_300],
      [20_300, 40_000],
    ]);
  });

  it('counts a class held back as unused quota over the run: after its last service with room left, and on a token without it', () => {
    const settings: ClassesSoakSettings = {
      ...SHORT,
      variant: 'configured',
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 2, windowSeconds: 10 }] }],
    };
    // Token A serves two reports at 0 s, then none though the window has room again at 10 s; token B (from 30 s) none.
    const entry = (at: number, quotaKey: string, family?: string) => ({
      requestId: `${quotaKey}-${at}-${family ?? 'general'}`,
      at,
      quotaKey,
      served: true,
      ...(family ? { family } : {}),
    });
    const log = [entry(0, 'A'), entry(0, 'A', 'reports'), entry(1, 'A', 'reports'), entry(30_000, 'B')];
    const [, cut] = classRows(
      settings,
      [],
      log,
      {},
      { startedAt: 0, endedAt: 60_000, events: [], liarReports: [] },
    );
    // 2 served of 2 per 10 s over A's 30 s (8) and B's 30 s (8).
    expect(cut?.quotaUsedRunPct).toBe(12.5);
    // The soak's span-of-use figure (first to last served) cannot see it.
    expect(cut?.quotaUsedPct).toBe(100);
  });

  it("cuts a class's figures at a limit change, counting each part against its own limits, and times the adoption", () => {
    const settings: ClassesSoakSettings = {
      ...SHORT,
      variant: 'limit-change',
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 2, windowSeconds: 10 }] }],
    };
    const served = (at: number, n: number) => ({
      requestId: `r${n}`,
      at,
      quotaKey: 'jti-1',
      family: 'reports',
      served: true,
    });
    const log = [0, 1, 10_000, 10_500, 20_000, 20_100, 20_200, 20_300].map(served);
    const hits = log.map((entry, n) => ({
      sentAt: entry.at - 10,
      at: entry.at + 10,
      status: 200,
      token: 't',
      requestId: `r${n}`,
      family: 'reports',
      named: 2,
    }));
    const watch = {
      reports: {
        learnedAt: 5,
        probeFallbacks: 0,
        changes: 1,
        probeReturns: 0,
        last: '4/10s',
        lastPollAt: 30_000,
        history: [
          { at: 100, limits: [{ limit: 2, windowSeconds: 10 }] },
          // Adopted at 15.2 s (its learnedAt), listed at the poll of 23 s.
          { at: 23_000, limits: [{ limit: 4, windowSeconds: 10, learnedAt: 15_200 }] },
        ],
      },
    };
    const change = {
      at: 15_000,
      label: 'limit change' as const,
      family: 'reports',
      limits: [{ limit: 4, windowSeconds: 10 }],
    };
    const [, reports] = classRows(settings, hits, log, watch, {
      startedAt: 0,
      endedAt: 30_000,
      events: [change],
      liarReports: [],
    });
    expect(reports?.phases?.map((p) => [p.label, p.served, p.quotaUsedPct, p.busiest[0]?.busiest])).toEqual([
      ['start', 4, 100, 2],
      ['limit change', 4, 100, 4],
    ]);
    expect(reports?.busiest.map((f) => f.busiest)).toEqual([2, 4]);
    expect(reports?.adoptions).toEqual([
      expect.objectContaining({ raised: true, atSeconds: 15, seconds: 8, shown: '4/10s' }),
    ]);
  });
  it('counts a raised part from its adoption on: before it, the contract is learning the raised limit', () => {
    const settings: ClassesSoakSettings = {
      ...SHORT,
      variant: 'limit-change',
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 2, windowSeconds: 10 }] }],
    };
    // 2/10 s, raised to 4/10 s at 15 s; the trial (2 + 1 a window at a 0.5 s margin: 3/10 s) served 3 at 15.6 s,
    // the rise was adopted at 23 s and 4 were served at 25.7 s: 4 of the 4 the raised limit allowed from 23 s.
    const times = [0, 1, 10_000, 10_500, 15_600, 15_700, 15_800, 25_700, 25_800, 25_900, 26_000];
    const log = times.map((at, n) => ({
      requestId: `r${n}`,
      at,
      quotaKey: 'jti-1',
      family: 'reports',
      served: true,
    }));
    const watch = {
      reports: {
        learnedAt: 5,
        probeFallbacks: 0,
        changes: 1,
        probeReturns: 0,
        last: '4/10s',
        lastPollAt: 35_000,
        history: [
          { at: 100, limits: [{ limit: 2, windowSeconds: 10 }] },
          { at: 23_500, limits: [{ limit: 4, windowSeconds: 10, learnedAt: 23_000 }] },
        ],
      },
    };
    const change = {
      at: 15_000,
      label: 'limit change' as const,
      family: 'reports',
      limits: [{ limit: 4, windowSeconds: 10 }],
    };
    const timeline = { startedAt: 0, endedAt: 35_000, events: [change], liarReports: [] };
    const [, reports] = classRows({ ...settings, marginSeconds: 0.5 }, [], log, watch, timeline);
    expect(reports?.phases?.map((p) => [p.label, p.served, p.quotaUsedPct])).toEqual([
      ['start', 4, 100],
      ['limit change', 4, 100],
    ]);
    // Not adopted: the whole part against the raised limit.
    const [, never] = classRows({ ...settings, marginSeconds: 0.5 }, [], log, {}, timeline);
    expect(never?.phases?.[1]?.quotaUsedPct).toBeLessThan(100);
  });

  it("measures the liar's hold from the vendor's log: from its first report, the class unserved though its limits had room", () => {
    const settings: ClassesSoakSettings = {
      ...SHORT,
      variant: 'liar',
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 2, windowSeconds: 10 }] }],
    };
    const log = [0, 1, 40_000, 40_001].map((at, n) => ({
      requestId: `r${n}`,
      at,
      quotaKey: 'jti-1',
      family: 'reports',
      served: true,
    }));
    const hits = log.map((entry) => ({
      sentAt: entry.at - 10,
      at: entry.at + 10,
      status: 200,
      token: 't',
      requestId: entry.requestId,
      family: 'reports',
      named: 2,
    }));
    // "1, 0 left, reset in 10 s" at 3 s and 8 s; room again at 10 s, nothing served until 40 s.
    const lie = (at: number) => ({
      at,
      class: 'reports',
      limit: 1,
      remaining: 0,
      reset: at / 1000 + 10,
      status: 204,
    });
    const [, reports] = classRows(
      settings,
      hits,
      log,
      {},
      {
        startedAt: 0,
        endedAt: 50_000,
        events: [],
        liarReports: [lie(3_000), lie(8_000)],
      },
    );
    expect(reports?.liar).toEqual({
      limits: [1],
      reports: 2,
      reportedWindowSeconds: 10,
      longestHoldSeconds: 30,
      releaseSeconds: 32,
      longestListedSeconds: 0,
    });
    expect(liarHoldBoundSeconds(reports?.liar as NonNullable<ClassRow['liar']>, 0.5)).toBe(13.5);
  });
});

/** A bound on a hang, not a timing: a pair's two runs take 20-45 s (plus the report, and a loaded machine). */
const PAIR_TIMEOUT_MS = 240_000;

/**
 * Two variants side by side, as `npm run soak -- classes` runs them, started in the suite's beforeAll; each then
 * has its own test. Two at a time, not six: six real-time soaks in one process starve each other of the event
 * loop (measured: classes served a tenth of what they were served alone, on a loaded machine).
 */
function pair(
  runs: readonly [() => Promise<ClassesSoakResult>, () => Promise<ClassesSoakResult>],
): readonly [() => ClassesSoakResult, () => ClassesSoakResult] {
  const results: ClassesSoakResult[] = [];
  beforeAll(async () => {
    results.push(...(await Promise.all(runs.map((run) => run()))));
    for (const result of results) console.info(summary(result));
  }, PAIR_TIMEOUT_MS);
  const take = (index: number) => () => {
    const result = results[index];
    if (!result) throw new Error('the pair did not run');
    return result;
  };
  return [take(0), take(1)];
}

describe("classes soak variants, short: the vendor's clock (issue 32)", () => {
  const [behind, ahead] = pair([
    () => runClassesSoak({ ...SHORT, variant: 'vendor-behind', vendorClockOffsetSeconds: -30 }),
    () => runClassesSoak({ ...SHORT, variant: 'vendor-ahead', vendorClockOffsetSeconds: 120 }),
  ]);

  it.each([
    ['vendor-behind', "30 s behind the broker's", behind],
    ['vendor-ahead', '120 s ahead', ahead],
  ] as const)("%s: the vendor's clock %s", (_variant, _offset, resultOf) => {
    const result = resultOf();
    for (const row of classes(result)) expect.soft(row.learnMs, `${row.quota}: learned`).toBeDefined();
    expectKept(expect, result, BOTH);
    expect.soft([result.logins, result.vendor401], 'logins and vendor 401s').toEqual([1, 0]);
  });
});

describe('classes soak variants, short: three windows, a restart (issue 32)', () => {
  const [threeWindows, restart] = pair([
    () =>
      runClassesSoak({
        ...SHORT,
        variant: 'three-windows',
        // Two of the longest window: 5/5 s allows 10 per 10 s and 15 per 15 s, 8/10 s 16 per 15 s, so each binds.
        durationSeconds: 30,
        families: [
          {
            name: 'reports',
            pathPrefix: '/reports/',
            limits: [
              { limit: 5, windowSeconds: 5 },
              { limit: 8, windowSeconds: 10 },
              { limit: 11, windowSeconds: 15 },
            ],
          },
          { name: 'rebalancing', pathPrefix: '/rebalancing/', limits: [{ limit: 4, windowSeconds: 10 }] },
        ],
      }),
    () => runClassesSoak({ ...SHORT, variant: 'restart', restartAtFraction: 1 / 2 }),
  ]);

  it('three-windows: reports 5/5 s + 8/10 s + 11/15 s, each binding in turn', () => {
    expectKept(expect, threeWindows(), BOTH);
  });

  it("restart: the broker's functions restarted halfway on the same dynalite data", () => {
    const result = restart();
    expectKept(expect, result, BOTH);
    expect.soft(result.logins, 'logins (the token outlives the restart)').toBe(1);
    for (const row of classes(result))
      expect
        .soft(row.probeReturns, `${row.quota}: returns to the probe (learned limits outlive the restart)`)
        .toBe(0);
    const { RATE_LIMIT_EXCEEDED: _rateLimited, ...otherErrors } = result.clientErrors;
    expect.soft(otherErrors, 'client errors but a 429 not waited out').toEqual({});
  });
});

describe('classes soak variants, short: a limit change, a liar (issue 32)', () => {
  const [limitChange, liar] = pair([
    () =>
      runClassesSoak({
        ...SHORT,
        variant: 'limit-change',
        // The raise at 10 s leaves the adoption bound (five windows and two margins, 53 s) and more; the lowering at
        // 60 s leaves two windows to see it held.
        durationSeconds: 80,
        limitChanges: [
          { atFraction: 1 / 8, family: 'rebalancing', limits: [{ limit: 8, windowSeconds: 10 }] },
          { atFraction: 3 / 4, family: 'reports', limits: [{ limit: 6, windowSeconds: 10 }] },
        ],
      }),
    () =>
      runClassesSoak({
        ...SHORT,
        variant: 'liar',
        // The fakes say 10 s (the windows here): it lies from 7.5 s to 30 s, and 15 s are left to see it let go.
        durationSeconds: 45,
        liar: {
          tight: {
            class: 'reports',
            resetSeconds: 10,
            everySeconds: 5,
            fromFraction: 1 / 6,
            untilFraction: 2 / 3,
          },
          loose: { class: 'rebalancing', limit: 49, resetSeconds: 10 },
        },
      }),
  ]);

  it('limit-change: rebalancing 4/10 s -> 8/10 s at 1/8, reports 10/10 s -> 6/10 s at 3/4', () => {
    const result = limitChange();
    // Rebalancing's use after its rise, and the time to adopt it, are figures here, not promises: the raised
    // part's use measured 75-98 % over six runs, and helper runs saw a rise adopted in 14-46 s or, once, not
    // within the run (R1 wants two callers' reports within two windows; permit batches may leave one caller a
    // window). The promise is P4's in the property (adopted within four windows and four margins, every run) and
    // test/vend-learned-rises.test.ts's. a6dc151 never listed the rise.
    expectKept(expect, result, ['reports'], ['reports']);
    const raised = result.rows.find((row) => row.quota === 'rebalancing')?.adoptions?.[0];
    const bound = adoptBoundSeconds([{ limit: 8, windowSeconds: 10 }], SHORT.marginSeconds);
    console.info(
      `limit-change: rebalancing 8/10 s listed as learned ${raised?.raised ? `in ${raised.seconds} s` : 'not in the run'} (bound in the property: ${bound} s)`,
    );
    // After the lowering: 6 per 10 s is named by the first answer after it; lowered below what the vendor's window
    // already held, every request in flight then meets it: at most one per consumer of the class, whether it meets
    // the limit before the ledger learned its name or after (a permit granted before the report, sent after it: what
    // the learned-limits property allows too, P1, docs/class-limits.md; a clean clone's run met one such 429).
    const lowered = result.rows.find((row) => row.quota === 'reports')?.phases?.at(-1);
    expect
      .soft(
        lowered?.vendor429 ?? 0,
        'reports: 429s after the lowering (requests in flight when it was named)',
      )
      .toBeLessThanOrEqual(CONSUMERS_PER_CLASS);
  });

  it('liar: a tight fake for reports every 5 s, a loose one for rebalancing on its probe', () => {
    const result = liar();
    console.info(JSON.stringify(result.liarReports));
    expect
      .soft(
        result.liarReports?.every((r) => r.status === 204),
        'the broker took every false report',
      )
      .toBe(true);
    // Honest use of reports is not promised while the liar may hold it; rebalancing's is.
    expectKept(expect, result, ['rebalancing']);
    const reports = result.rows.find((row) => row.quota === 'reports');
    expect.soft(reports?.liar, 'reports: the liar measured').toBeDefined();
    if (reports?.liar) {
      // It holds the class while it keeps reporting (a report at a time), and lets go within the window it reported
      // and three margins of its last report (T2).
      const bound = liarHoldBoundSeconds(reports.liar, SHORT.marginSeconds);
      expect
        .soft(
          reports.liar.releaseSeconds ?? Number.POSITIVE_INFINITY,
          `reports: held by one caller's word after its last report, s (promise: ${bound.toFixed(1)})`,
        )
        .toBeLessThanOrEqual(bound);
    }
  });
});
