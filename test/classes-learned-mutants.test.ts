import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { type LocalDynamo, startDynaliteServer } from './support/dynalite.js';
import { checkRun } from './support/learned-checks.js';
import { runScenario, type WorldOptions, type WorldParts } from './support/learned-property-world.js';
import { type Kind, type Scenario, scenarioArb } from './support/learned-scenarios.js';

/**
 * The controls of test/classes-learned-property.test.ts: copies of the learned-limits rules with one rule broken
 * back to what it was or to its adversary's wish, run through the same world and checks, which must tell each from
 * the real rules. Differential (the scenarios drawn here are not the property test's runs, which the real rules
 * keep): a mutant is caught by a scenario in which the real rules keep the property and the mutant breaks it. A
 * mutant's `where` only picks the kind of liar or run it is about, never a run found to show it.
 *
 * The rules are swapped in through this file's module mocks (pass-throughs to the real functions unless a mutant
 * is on), so shared/ledger stays as it is; C1's mutant needs no mock (the world drops the reports' vendor offset).
 * One engine (dynalite): what is tested is the checks' power, not DynamoDB.
 */
const SEED = Number(process.env.LEARNED_MUTANTS_SEED ?? 20_261_130);
/** P4 not measured in a run: the real rules do not count as keeping it, nor a mutant as breaking it. */
const NOT_MEASURED = 'not measured';
/** Scenarios tried per mutant before it counts as not caught. */
const TRIES = Number(process.env.LEARNED_MUTANTS_TRIES ?? 12);

type MutantName = 'T4' | 'T2' | 'I3-short' | 'I3-long' | 'R3' | 'R1';
const mutant = vi.hoisted(() => ({ on: undefined as MutantName | undefined }));

vi.mock('../shared/ledger/learned-limits.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../shared/ledger/learned-limits.js')>();
  const teach: typeof actual.teach = (current, evidence, options) => {
    const next = actual.teach(current, evidence, options);
    if (mutant.on === 'T4') {
      // T4 as it was: a report corroborates another caller's provisional limit it is tighter than, not only the
      // same limit (an honest 10/60 s made a liar's 49/60 s kept).
      const list = (next ?? current).map((l) => ({ ...l }));
      let changed = next !== undefined;
      for (const l of actual.inForce(list, evidence.at))
        if (
          l.until !== undefined &&
          l.by !== evidence.by &&
          evidence.limit <= l.limit &&
          evidence.windowSeconds >= l.windowSeconds
        ) {
          delete l.until;
          changed = true;
        }
      return changed ? list : undefined;
    }
    if (mutant.on === 'T2' && next) {
      // One caller's word holds a day past its window (T2 broken: a liar's limit outlives it).
      return next.map((l) =>
        l.until === undefined || l.by !== evidence.by ? l : { ...l, until: l.until + 86_400_000 },
      );
    }
    return next;
  };
  return { ...actual, teach };
});

vi.mock('../shared/ledger/learned-evidence.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../shared/ledger/learned-evidence.js')>();
  const { LEARNED_WINDOWS } = await import('../shared/ledger/learned-limits.js');
  const evidenceOf: typeof actual.evidenceOf = (report, context) => {
    const outcome = actual.evidenceOf(report, context);
    if (!('evidence' in outcome) || (mutant.on !== 'I3-short' && mutant.on !== 'I3-long')) return outcome;
    // I3 off by one common length: shorter (a window learned shorter than the answers imply) or longer.
    const at = LEARNED_WINDOWS.indexOf(outcome.evidence.windowSeconds as (typeof LEARNED_WINDOWS)[number]);
    const moved =
      LEARNED_WINDOWS[
        Math.max(0, Math.min(LEARNED_WINDOWS.length - 1, at + (mutant.on === 'I3-short' ? -1 : 1)))
      ];
    return { evidence: { ...outcome.evidence, windowSeconds: moved as number } };
  };
  return { ...actual, evidenceOf };
});

vi.mock('../shared/ledger/learned-rise.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../shared/ledger/learned-rise.js')>();
  const observeRise: typeof actual.observeRise = (current, learned, evidence, trialUsed) => {
    const outcome = actual.observeRise(current, learned, evidence, trialUsed);
    if (mutant.on === 'R3' && outcome.learned) {
      // R3 never adopts: the trial goes on.
      return { rises: current.map((r) => ({ ...r })), changed: false };
    }
    if (mutant.on === 'R1' && !evidence.refused) {
      // R1 with one caller: any report of a larger limit starts a trial (a liar alone can).
      const rises = outcome.rises.map((r) =>
        r.trialSince === undefined && r.seen.length > 0 && r.blockedUntil === undefined
          ? { ...r, trialSince: evidence.at }
          : r,
      );
      return { ...outcome, rises, changed: outcome.changed || rises.some((r, i) => r !== outcome.rises[i]) };
    }
    return outcome;
  };
  return { ...actual, observeRise };
});

/** Each mutant, the property that must catch it and the kind of run that shows it (its scenarios are drawn so). */
const MUTANTS: {
  name: MutantName | 'C1';
  rule: string;
  /** The property (a violation's prefix), or P4's measure with the run's end as its bound. */
  property: string;
  kind: Kind;
  /** Where the real rules can show it at all (R3: R1 and R3 fail to adopt other rises, known). */
  where?: (s: Scenario) => boolean;
}[] = [
  { name: 'C1', rule: "the reports' vendor clock offset ignored", property: 'P1', kind: 'mixed' },
  {
    name: 'T4',
    rule: 'a tighter report corroborates a looser one',
    property: 'P2a',
    kind: 'adversary',
    // A loose word: the mutant keeps it once an honest caller names a tighter limit.
    where: (s) => s.liar?.strategy === 'loose',
  },
  {
    name: 'T2',
    rule: "one caller's word outlives its window",
    property: 'P2b',
    kind: 'adversary',
    // A tighter word: one the class heeds (T1 adds it), so that it has a word to outlive.
    where: (s) => s.liar?.strategy === 'tight',
  },
  { name: 'I3-short', rule: 'windows learned a common length short', property: 'P1', kind: 'use' },
  { name: 'I3-long', rule: 'windows learned a common length long', property: 'P3', kind: 'use' },
  {
    name: 'R3',
    rule: 'a rise never adopted',
    property: 'P4 by the end of the run',
    kind: 'rise',
    where: (s) => s.windowKind === 'sliding' && (s.change?.to ?? 0) > 2,
  },
  {
    name: 'R1',
    rule: "one caller's report starts a trial",
    property: 'P2a',
    kind: 'adversary',
    // Kept limits to rise above (two callers), one window (so no honest report of a larger limit explains a
    // trial), the liar once they are kept.
    where: (s) =>
      s.liar?.strategy === 'loose' &&
      s.callers.length > 1 &&
      s.family.length === 1 &&
      s.liar.startSeconds >= 20,
  },
];

describe('the learned-limits properties catch broken rules (dynalite)', () => {
  let dynamo: LocalDynamo;
  let sandbox: Sandbox;
  let parts: WorldParts;
  const clock = new ManualClock();
  beforeAll(async () => {
    dynamo = await startDynaliteServer();
    sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, recordRequests: true });
    parts = {
      clock,
      sandbox,
      endpoint: dynamo.endpoint,
      tableName: await dynamo.createTable('learned-mutants'),
      operatorClient: dynamo.client,
    };
  });
  afterAll(async () => {
    mutant.on = undefined;
    await sandbox.close();
    await dynamo.close();
  });

  /** The violations of `property` in one run of `scenario`, with a mutant on or not. */
  /**
   * The violations of `property` in one run of `scenario`, with a mutant on or not. P4 by the end of the run: the
   * bound as long as the run (a rise the real rules adopt, late, tells one never adopted).
   */
  const violations = async (
    scenario: Scenario,
    property: string,
    on?: MutantName,
    options: WorldOptions = {},
  ) => {
    mutant.on = on;
    try {
      const verdict = checkRun(await runScenario(parts, scenario, options));
      if (property === 'P4 by the end of the run') {
        const rise = verdict.rise;
        if (!rise || !('measured' in rise)) return [NOT_MEASURED];
        return Number.isFinite(rise.measured.adoptedWithinMs) ? [] : ['P4: never adopted'];
      }
      return verdict.violations.filter((v) => v.startsWith(`${property}:`));
    } finally {
      mutant.on = undefined;
    }
  };

  it.each(MUTANTS)(
    '$name ($rule): $property tells it from the real rules',
    async ({ name, property, kind, where }) => {
      const scenarios = fc.sample(
        scenarioArb.filter((s) => s.kind === kind && (where?.(s) ?? true)),
        { numRuns: TRIES, seed: SEED },
      );
      let caught: { scenario: Scenario; violations: string[] } | undefined;
      let realBroke = 0;
      for (const scenario of scenarios) {
        if ((await violations(scenario, property)).length > 0) {
          realBroke++;
          continue;
        }
        const found = (
          name === 'C1'
            ? await violations(scenario, property, undefined, { dropVendorOffset: true })
            : await violations(scenario, property, name)
        ).filter((v) => v !== NOT_MEASURED);
        if (found.length > 0) {
          caught = { scenario, violations: found };
          break;
        }
      }
      expect(
        caught,
        `not caught in ${TRIES} runs (${realBroke} broke ${property} with the real rules)`,
      ).toBeDefined();
    },
    600_000,
  );

  it('P1 allows a refusal before its limit is named, while a trial is on and after a lapse, and no other', () => {
    const T = 1_000_000;
    const family = { limit: 1, windowSeconds: 10, family: true, index: 0, from: T, to: T + 60_000 };
    const general = { limit: 5, windowSeconds: 60, family: false, index: 0, from: T, to: T + 60_000 };
    const refused = (at: number, by: { limit: number; windowSeconds: number }, fam = true) => ({
      at,
      served: false,
      refusedBy: { ...(fam ? { family: 'reports' } : {}), limit: by.limit, windowSeconds: by.windowSeconds },
    });
    const report = {
      sentAt: T,
      by: 'honest',
      limit: 1,
      remaining: 0,
      reset: 0,
      refused: true,
      reached: true,
    };
    // The class's learned item: 1/10 s kept from the naming report on (or one caller's word, ending at +8 s).
    const learned = (lapsing: boolean) => ({
      reports: [
        {
          limit: 1,
          windowSeconds: 10,
          learnedAt: T + 5000,
          by: 'h',
          ...(lapsing ? { until: T + 8000 } : {}),
        },
      ],
    });
    const record = (sends: ReturnType<typeof refused>[], trial = false, lapsing = false) =>
      ({
        scenario: {
          callers: [{ latencyMs: 0 }],
          phases: [{ seconds: 60, busy: true }],
          family: [],
          exact: false,
        },
        start: T,
        end: T + 60_000,
        offsetMs: 0,
        measuredOffset: { lo: 0, hi: 0 },
        marginMs: 250,
        vendorLimits: [family, general],
        sends,
        grants: [],
        honestReports: [{ ...report, at: T + 5000 }],
        liarReports: [],
        observations: [
          { at: T + 5000, version: 1, classes: learned(lapsing), rises: {} },
          ...(trial
            ? [
                {
                  at: T + 15_000,
                  version: 2,
                  classes: learned(lapsing),
                  rises: { reports: [{ limit: 1, windowSeconds: 10, seen: [], trialSince: T + 15_000 }] },
                },
              ]
            : []),
        ],
        quietChecks: [],
        liarTag: 'liar',
      }) as unknown as Parameters<typeof checkRun>[0];
    const p1 = (r: Parameters<typeof checkRun>[0]) =>
      checkRun(r).violations.filter((v) => v.startsWith('P1:'));
    // Before the naming report (+5 s): allowed and counted. After it: a violation, unless a trial is on.
    expect(p1(record([refused(T + 3000, family)]))).toEqual([]);
    expect(checkRun(record([refused(T + 3000, family)])).allowances.unnamed).toEqual([1]);
    expect(p1(record([refused(T + 20_000, family)]))).toHaveLength(1);
    expect(p1(record([refused(T + 20_000, family)], true))).toEqual([]);
    // After one caller's word on it lapsed (T2: nothing in force holds it, its last naming report more than half
    // its window and three margins behind): allowed and counted, one per honest caller.
    expect(p1(record([refused(T + 20_000, family)], false, true))).toEqual([]);
    expect(checkRun(record([refused(T + 20_000, family)], false, true)).allowances.lapsed).toEqual([1]);
    expect(p1(record([refused(T + 20_000, family), refused(T + 21_000, family)], false, true))).toHaveLength(
      1,
    );
    // Two before it, with one honest caller: one more than can have been in flight.
    expect(p1(record([refused(T + 1000, family), refused(T + 3000, family)]))).toHaveLength(1);
    // A general limit is configured: no refusal of it is allowed, trial or not.
    expect(p1(record([refused(T + 3000, general, false)], true))).toHaveLength(1);
  });
});
