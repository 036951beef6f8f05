import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { checkRun, type RunVerdict } from './support/learned-checks.js';
import { runScenario, type WorldParts } from './support/learned-property-world.js';
import { type Scenario, scenarioArb } from './support/learned-scenarios.js';
import { timelineOf } from './support/learned-timeline.js';
import { FULL_RUNS, propertyRuns } from './support/property-runs.js';

/**
 * Issue 32, build point 5: learned class limits (docs/class-limits.md) against the vendor sandbox, model-based.
 * Each run draws a vendor family of 1 to 3 windows (fixed or sliding, common lengths or not), general limits, a
 * vendor clock offset up to the accepted 900 s, 1 to 3 honest callers with their own vend processes, demand that
 * comes and goes, a family limit the vendor raises or lowers, DynamoDB faults, and maybe one liar
 * (learned-scenarios.ts); the run is played on the real parts in simulated time (learned-property-world.ts), and the
 * properties are checked from the vendor's own log (learned-checks.ts, where P1-P4 are stated precisely).
 *
 * The vendor is the sandbox over HTTP (its own limiter, log, families and clock offset): a run costs its DynamoDB
 * calls, not its HTTP ones (about 10 requests and 100 DynamoDB calls a run). The runs are drawn and played once
 * per engine; each property is its own test over all of them. The counterexamples the runs found on earlier rules
 * are pinned (COUNTEREXAMPLES), each the smallest found and now a regression test of the rule it broke. The
 * controls (mutants of the rules that the same checks must tell from the real ones) are
 * test/classes-learned-mutants.test.ts.
 *
 * LEARNED_PROPERTY_RUNS and LEARNED_PROPERTY_SEED change the runs; LEARNED_PROPERTY_REPLAY='<scenario JSON>' plays
 * one scenario and prints its timeline; LEARNED_PROPERTY_SHRINK=P1 (or P2, P3, P4) shrinks the first counterexample
 * of that property with fast-check.
 */
/**
 * The engines take turns: run k of the seed is played on ENGINES[k % 2], so each engine plays half the runs and
 * the two engines all of them. 60 runs in `npm test` (30 on each engine), the first 60 of test:long's 200
 * (test/support/property-runs.ts; a run is about 100 DynamoDB calls of 2 to 3 ms and 0.25 s of this process's
 * CPU: 140 runs, 70 on each engine, took 35 s on dynalite and 37 s on DynamoDB Local side by side, a fifth of
 * `npm test`; issue 34 asks for three minutes, so the 200 runs issue 32 asked of `npm test` run in test:long,
 * which CI runs). LEARNED_PROPERTY_RUNS sets another count; LEARNED_PROPERTY_EVERY_ENGINE=1 plays every run on
 * each engine.
 */
const RUNS = Number(process.env.LEARNED_PROPERTY_RUNS ?? propertyRuns({ quick: 60, full: 200 }));
const EVERY_ENGINE = process.env.LEARNED_PROPERTY_EVERY_ENGINE === '1';
/** Run k of the seed is this engine's to play. */
const playsRun = (engine: string, k: number): boolean =>
  EVERY_ENGINE || k % ENGINES.length === ENGINES.indexOf(engine as (typeof ENGINES)[number]);
const runsOf = (engine: string): number =>
  Array.from({ length: RUNS }, (_, k) => k).filter((k) => playsRun(engine, k)).length;
const SEED = Number(process.env.LEARNED_PROPERTY_SEED ?? 20_261_129);
const REPLAY = process.env.LEARNED_PROPERTY_REPLAY;
const SHRINK = process.env.LEARNED_PROPERTY_SHRINK;
/** Replaying or shrinking defines only that test (no skipped ones: a plain `if`, not `it.skipIf`). */
const PLAYING = REPLAY === undefined && SHRINK === undefined;

const quiet = { lostAnswer: 0, throttle: 0, serverError: 0 };
const login = { beforeMs: 100, afterMs: 100 };
/**
 * Counterexamples the property found on earlier rules, each the smallest found (by fast-check's shrinking from
 * LEARNED_PROPERTY_SEED, or by hand from a shrunk one): no fault, no liar, no clock offset unless said. Each is now
 * a regression test: the property it broke holds in it. `allowed`: the P1 allowance the run must count (the
 * contract lets it happen: learned-checks.ts). Read one with LEARNED_PROPERTY_REPLAY.
 */
const COUNTEREXAMPLES: {
  rule: string;
  breaks: string;
  allowed?: keyof Pick<RunVerdict['allowances'], 'unnamed' | 'lapsed'>;
  scenario: Scenario;
}[] = [
  {
    rule: "C1 (vendor-feedback.ts addCap): an honest cap ends at the learned window, a lower bound, before the vendor's reset",
    breaks: 'P1',
    // Shrunk (seed 20261129). One caller's three limits lapse while it is idle (T2); back at +143 s, 2 s before a
    // fixed window ends, its answer says "1 more until +145 s": learned as 2/1 s, the cap is cut to +144.25 s, and
    // the grant at +144.29 s meets a 429.
    scenario: {
      kind: 'mixed',
      windowKind: 'fixed',
      family: [
        { limit: 2, windowSeconds: 5 },
        { limit: 3, windowSeconds: 15 },
        { limit: 4, windowSeconds: 60 },
      ],
      exact: true,
      general: [{ limit: 5, windowSeconds: 10 }],
      offsetMs: 0,
      login: { beforeMs: 0, afterMs: 0 },
      phaseMs: 0,
      callers: [{ latencyMs: 0 }],
      phases: [
        { seconds: 95, busy: true },
        { seconds: 48, busy: false },
        { seconds: 48, busy: true },
      ],
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: "T4 with I4: two honest lower bounds keep a window shorter than the vendor's, and I4 caps every later report of it",
    breaks: 'P1',
    // Two callers answered 2 s before a fixed 15 s window ends: both name 1 over 1 s, kept; every later report of
    // the limit is cut to the next common window (5, then 10 s), so 1/15 s is learned a cycle at a time, 429s between.
    scenario: {
      kind: 'mixed',
      windowKind: 'fixed',
      family: [{ limit: 1, windowSeconds: 15 }],
      exact: true,
      general: [{ limit: 50, windowSeconds: 60 }],
      offsetMs: 0,
      login,
      phaseMs: 13_000,
      callers: [{ latencyMs: 0 }, { latencyMs: 0 }],
      phases: [{ seconds: 120, busy: true }],
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: "T2: a one-caller limit lapsed in an idle spell leaves the next burst to the class's other limits",
    breaks: 'P1',
    allowed: 'lapsed',
    // 3/15 s was one caller's word when demand paused for 14 s; after it, the three callers get four grants in 15 s.
    // What T2 allows ("a limit only one caller has named may so lapse after a pause and be named again by the next
    // answer"): P1 counts the refusal as lapsed (nothing in force held 3/15 s, and the last report naming it, at
    // +6.3 s, was more than its least T2 end behind), one request in flight when the answer naming it came back.
    scenario: {
      kind: 'mixed',
      windowKind: 'sliding',
      family: [
        { limit: 2, windowSeconds: 5 },
        { limit: 3, windowSeconds: 15 },
      ],
      exact: true,
      general: [{ limit: 50, windowSeconds: 60 }],
      offsetMs: 0,
      login,
      phaseMs: 0,
      callers: [{ latencyMs: 180 }, { latencyMs: 230 }, { latencyMs: 150 }],
      phases: [
        { seconds: 14, busy: true },
        { seconds: 14, busy: false },
        { seconds: 28, busy: true },
      ],
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: "T3 against C1: the cap of a report outlives its caller's limit (W + 3 margins), and the class falls to the probe",
    breaks: 'P3',
    // Sliding 1/5 s, margin 0.25 s, the token's offset known within 1.8 s: each cap ends up to 2.8 s after the
    // window, the limit 0.75 s after it; the class then waits out the probe's 10 s: about 80 % of the capacity.
    // Mended by T2's end past the reset's latest reading; what is left (86 % of the capacity over 5.25 s) is each
    // cap held to that reading, up to 1.4 s past the vendor's reset here (C1), and the denials' spread: the
    // ledger's design, which P3 counts (learned-checks.ts readingSlackMs, hintSpreadMs).
    scenario: {
      kind: 'use',
      windowKind: 'sliding',
      family: [{ limit: 1, windowSeconds: 5 }],
      exact: true,
      general: [{ limit: 50, windowSeconds: 60 }],
      offsetMs: 0,
      login: { beforeMs: 400, afterMs: 400 },
      phaseMs: 0,
      callers: [{ latencyMs: 100 }],
      phases: [{ seconds: 120, busy: true }],
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: "learning point 2 (vendor-feedback.ts addCap): an answer's cap judged held by a provisional limit's ring that ends before its reset",
    breaks: 'P1',
    // A fixed 1/5 s + 2/15 s, two callers taking turns (one answers at once, the other 293 ms later), the token's
    // offset known within 2 s: 2/15 s is one caller's word, renewed by its reports. At +86.7 s the other caller's
    // answer says "2, none left until +93.3 s" (+94.0 s at its latest reading): its cap was not kept, the 15 s ring
    // holding as much; that ring's limit ended at +87.2 s, its caller's turn not come, and the grant at +88.0 s
    // met the vendor's 429. Found at 215 s with a rise (seed 20261129), shortened by hand.
    scenario: {
      kind: 'mixed',
      windowKind: 'fixed',
      family: [
        { limit: 1, windowSeconds: 5 },
        { limit: 2, windowSeconds: 15 },
      ],
      exact: true,
      general: [{ limit: 3, windowSeconds: 10 }],
      offsetMs: 4,
      login: { beforeMs: 505, afterMs: 457 },
      phaseMs: 41_200,
      callers: [{ latencyMs: 293 }, { latencyMs: 0 }],
      phases: [{ seconds: 125, busy: true }],
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: "R1: a kept limit of 1 never gets two callers' reports within its window, so its rise is never tried",
    breaks: 'P4',
    // The vendor raises 1/10 s to 2/10 s at +40 s; the class grants one request per 10.4 s, each to one caller, whose
    // report comes more than a window after the last one: R1 drops it. No trial in 110 s.
    scenario: {
      kind: 'rise',
      windowKind: 'sliding',
      family: [{ limit: 1, windowSeconds: 10 }],
      exact: true,
      general: [{ limit: 50, windowSeconds: 120 }],
      offsetMs: 0,
      login,
      phaseMs: 0,
      callers: [{ latencyMs: 50 }, { latencyMs: 120 }, { latencyMs: 200 }],
      phases: [{ seconds: 150, busy: true }],
      change: { atSeconds: 40, index: 0, to: 2 },
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: 'R3 (trialUsed): a trial used in bursts is never seen used: its whole slots miss every burst',
    breaks: 'P4',
    // 3/30 s raised to 5/30 s; the trial from +127 s lets 4 through in a burst every 31.5 s and each report comes
    // right after its burst: the span trialUsed counts (whole 2.5 s slots, ending two margins before the report)
    // misses the burst before. Not adopted at +285 s, five windows on.
    scenario: {
      kind: 'rise',
      windowKind: 'sliding',
      family: [{ limit: 3, windowSeconds: 30 }],
      exact: true,
      general: [{ limit: 50, windowSeconds: 120 }],
      offsetMs: 0,
      login,
      phaseMs: 0,
      callers: [{ latencyMs: 100 }, { latencyMs: 50 }],
      phases: [{ seconds: 400, busy: true }],
      change: { atSeconds: 100, index: 0, to: 5 },
      faults: quiet,
      seed: 1,
    },
  },
  {
    rule: 'H3 (vendor-feedback.ts addCap): the next window\'s cap put together with a spent one, "the fewer remaining, the later end", holds a window\'s room until the later end',
    breaks: 'P3',
    // Sliding 3/10 s, two callers: a held cap "1 more until +44.9 s", spent by a grant at +43.6 s, and the next
    // answer's "2 more until +55 s" made "0 until +55 s": 20 of 24 (83 %). Run 101-200 of the default seed.
    scenario: {
      kind: 'mixed',
      windowKind: 'sliding',
      family: [{ limit: 3, windowSeconds: 10 }],
      exact: true,
      general: [{ limit: 12, windowSeconds: 10 }],
      offsetMs: 1994,
      login: { beforeMs: 108, afterMs: 567 },
      phaseMs: 340_182,
      callers: [{ latencyMs: 257 }, { latencyMs: 24 }],
      phases: [
        { seconds: 30, busy: true },
        { seconds: 90, busy: true },
      ],
      faults: quiet,
      seed: 2_055_356_350,
    },
  },
];

interface Run {
  scenario: Scenario;
  verdict: RunVerdict;
  sends: number;
}

const ofProperty = (name: string) => (violation: string) =>
  violation.startsWith(`${name}:`) || violation.startsWith(`${name}a:`) || violation.startsWith(`${name}b:`);

/**
 * The engines' suites run side by side (DynamoDB Local is a JVM of its own: the second core), each its tests one
 * after another (`serial`: they share the suite's sandbox and clock).
 */
const serial = { concurrent: false } as const;

describe.each(PLAYING ? ENGINES : (['dynalite'] as const))(
  'learned class limits against the vendor sandbox on %s',
  { concurrent: true },
  (engine) => {
    let dynamo: LocalDynamo;
    let sandbox: Sandbox;
    let parts: WorldParts;
    const clock = new ManualClock();
    beforeAll(async () => {
      dynamo = await startEngine(engine);
      sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, recordRequests: true });
      parts = {
        clock,
        sandbox,
        endpoint: dynamo.endpoint,
        tableName: await dynamo.createTable('learned-property'),
        operatorClient: createDynamoDbClient({ endpoint: dynamo.endpoint }),
      };
    });
    afterAll(async () => {
      parts.operatorClient.destroy();
      await sandbox.close();
      await dynamo.close();
    });

    /** The runs, played once (by whichever test asks first). */
    let played: Promise<{ runs: Run[]; seconds: number }> | undefined;
    const runs = () => {
      played ??= (async () => {
        const started = performance.now();
        const out: Run[] = [];
        for (const [k, scenario] of fc.sample(scenarioArb, { numRuns: RUNS, seed: SEED }).entries()) {
          if (!playsRun(engine, k)) continue;
          const record = await runScenario(parts, scenario);
          out.push({ scenario, verdict: checkRun(record), sends: record.sends.length });
        }
        return { runs: out, seconds: (performance.now() - started) / 1000 };
      })();
      return played;
    };
    /** The runs that break property `name`, each with its scenario (to replay) and violations. */
    const failing = async (name: string) =>
      (await runs()).runs
        .map(({ scenario, verdict }) => ({
          scenario,
          violations: verdict.violations.filter(ofProperty(name)),
        }))
        .filter((r) => r.violations.length > 0)
        .map((r) => `${r.violations.slice(0, 3).join('; ')}\n  scenario ${JSON.stringify(r.scenario)}`);

    if (PLAYING)
      it(`plays its ${runsOf(engine)} of ${RUNS} random runs`, { ...serial, timeout: 600_000 }, async () => {
        const { runs: all, seconds } = await runs();
        const measured = (key: 'use' | 'rise') =>
          all.filter((r) => r.verdict[key] && 'measured' in (r.verdict[key] ?? {}));
        const excluded = (key: 'use' | 'rise') => {
          const reasons: Record<string, number> = {};
          for (const { verdict } of all) {
            const m = verdict[key];
            if (m && 'excluded' in m) reasons[m.excluded] = (reasons[m.excluded] ?? 0) + 1;
          }
          return reasons;
        };
        const sum = (f: (r: Run) => number) => all.reduce((total, r) => total + f(r), 0);
        const unnamed = all.flatMap((r) => r.verdict.allowances.unnamed);
        const lapsed = all.flatMap((r) => r.verdict.allowances.lapsed);
        console.info(
          `${engine}: ${all.length} runs in ${seconds.toFixed(1)} s, ${sum((r) => r.sends)} vendor requests; ` +
            `P1 allowances: ${unnamed.reduce((a, b) => a + b, 0)} unnamed (per limit: ${JSON.stringify(histogram(unnamed))}), ` +
            `${lapsed.reduce((a, b) => a + b, 0)} lapsed (per lapse: ${JSON.stringify(histogram(lapsed))}), ` +
            `${sum((r) => r.verdict.allowances.trial)} in ${sum((r) => r.verdict.allowances.trials)} trials ` +
            `(${sum((r) => r.verdict.allowances.refusedInTrials)} refused); ` +
            `P2b: ${sum((r) => r.verdict.quiet.checks)} checks, ${sum((r) => r.verdict.quiet.asked)} asks after a quiet spell; ` +
            `P3 measured in ${measured('use').length} (lowest ${Math.min(...measured('use').map((r) => (r.verdict.use && 'measured' in r.verdict.use ? r.verdict.use.measured.use : 1))).toFixed(2)}), excluded ${JSON.stringify(excluded('use'))}; ` +
            `P4 measured in ${measured('rise').length}, excluded ${JSON.stringify(excluded('rise'))}`,
        );
        expect(all).toHaveLength(runsOf(engine));
        // The runs were about something: requests sent, use and rises measured, liars checked.
        expect(sum((r) => r.sends)).toBeGreaterThan(5 * all.length);
        // Use is measured where a run's demand held a learned class at its limits: in more than a tenth of
        // test:long's 200 runs (CI), in a few of npm test's first 60 (1 and 3 of 30 per engine at the seed).
        expect(measured('use').length).toBeGreaterThan(FULL_RUNS ? all.length / 10 : 0);
        expect(measured('rise').length).toBeGreaterThan(0);
        expect(sum((r) => r.verdict.quiet.asked)).toBeGreaterThan(0);
      });

    for (const [name, what] of [
      ['P1', 'no span of a vendor limit over it, but for requests sent before it was named and rise trials'],
      [
        'P2',
        'a liar makes the class no looser than the honest evidence, and its word ends a window after it',
      ],
      ['P3', 'at least 90 % of the capacity once learned'],
      ['P4', 'a raised limit adopted within four windows and four margins of the second caller'],
    ] as const)
      if (PLAYING)
        it(`${name}: ${what}`, { ...serial, timeout: 600_000 }, async () => {
          expect(await failing(name)).toEqual([]);
        });

    for (const { rule, breaks, allowed, scenario } of COUNTEREXAMPLES)
      if (PLAYING)
        it(`keeps ${breaks}: ${rule}`, serial, async () => {
          const verdict = checkRun(await runScenario(parts, scenario));
          expect(verdict.violations.filter(ofProperty(breaks))).toEqual([]);
          if (allowed) expect(verdict.allowances[allowed].length).toBeGreaterThan(0);
        });

    if (REPLAY !== undefined)
      it('replays one scenario', serial, async () => {
        const record = await runScenario(parts, JSON.parse(REPLAY as string) as Scenario);
        console.info(`${timelineOf(record)}\n${JSON.stringify(checkRun(record).violations, null, 1)}`);
      });

    if (SHRINK !== undefined)
      it(`shrinks a counterexample of ${SHRINK}`, { ...serial, timeout: 3_600_000 }, async () => {
        await fc.assert(
          fc.asyncProperty(fc.noBias(scenarioArb), async (scenario) => {
            const record = await runScenario(parts, scenario);
            expect(checkRun(record).violations.filter(ofProperty(SHRINK as string))).toEqual([]);
          }),
          { numRuns: RUNS, seed: SEED },
        );
      });
  },
);

function histogram(values: readonly number[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
