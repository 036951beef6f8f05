import fc from 'fast-check';
import type { Region, RegionPlan, RegionsSimOptions } from '../../local/regions-sim.js';
import { rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import { MAX_LEDGER_CLOCK_SKEW_MS } from '../../shared/ledger/ledger-clock.js';
import { CLOCK_BOUND_MS } from '../../shared/regions/lease.js';
import { RENEWER_CLOCK_SHARE } from '../../shared/regions/renewer-clock.js';
import { seededRandom } from './sandbox-http.js';

/**
 * Random two-Region runs for the simulation (local/regions-sim.ts), short enough that hundreds take seconds:
 * 6 to 24 simulated minutes (the hour limit binds after 20 minutes of a saturated minute), a demand split that may
 * shift once, bursts, a Region lost (and maybe back), a partition from the lease store, the lease store's own
 * faults, the Regions' DynamoDB clocks apart by up to what the bound leaves them (its ends included), one or two
 * renewer processes per Region (overlapping runs) on container clocks skewed by anything up to the ledger's
 * limit and beyond it (refused), stalls before any of their calls, and either way of setting the targets.
 */
const MINUTE_MS = 60_000;

/**
 * A renewer container's clock minus its Region's DynamoDB clock: exact, seconds off, the 90 s ahead, any
 * amount the ledger corrects, or beyond it (the renewer refuses: it must renew nothing).
 */
const renewerOffsetArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: -5_000, max: 5_000 }) },
  { weight: 2, arbitrary: fc.constantFrom(-90_000, 90_000) },
  { weight: 2, arbitrary: fc.integer({ min: -MAX_LEDGER_CLOCK_SKEW_MS, max: MAX_LEDGER_CLOCK_SKEW_MS }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.boolean(),
        fc.integer({ min: MAX_LEDGER_CLOCK_SKEW_MS + 1_000, max: 2 * MAX_LEDGER_CLOCK_SKEW_MS }),
      )
      .map(([ahead, ms]) => (ahead ? -ms : ms)),
  },
);
/** One run of a Region's renewer, or two at once (a run that overlaps the next). */
const renewersArb = fc.array(renewerOffsetArb, { minLength: 1, maxLength: 2 });

/** Renewer clocks that the ledger would refuse (renewer-clock.ts): such a process must renew nothing. */
export const refusedOffset = (offsetMs: number): boolean => Math.abs(offsetMs) > MAX_LEDGER_CLOCK_SKEW_MS;

/** The learned class's name in the drawn settings (`classes: { reports: [] }`). */
export const LEARNED_CLASS = 'reports';

/**
 * The most the probe (1 per 10 s and the 3 s margin, docs/class-limits.md) lets the vendor see in a window of
 * `windowSeconds`: one grant per 13 s span, each sent within its 2 s validity. The vendor's class limits are drawn
 * at least this loose: a tighter one is refused once before it is named (the promise "at most one request per limit
 * not yet named", which test/classes-learned-property.test.ts checks), and this property counts every 429.
 */
export const probeMostIn = (windowSeconds: number): number => Math.floor((windowSeconds + 2) / 13) + 1;

/** A vendor limit of a learned class: a common window and a limit no tighter than the probe. */
const classLimitArb = fc
  .record({
    windowSeconds: fc.constantFrom(10, 15, 30, 60, 120, 300),
    above: fc.integer({ min: 0, max: 30 }),
  })
  .map(({ windowSeconds, above }) => ({ windowSeconds, limit: probeMostIn(windowSeconds) + above }));

/**
 * A learned class asked for in both Regions: its share of each Region's asks, its vendor limits (1 to 3 windows),
 * when a report teaches them (never, in some runs) and in which Region, how long before that the vendor answered.
 */
const learnedArb = fc.record({
  part: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
  limits: fc.uniqueArray(classLimitArb, { minLength: 1, maxLength: 3, selector: (l) => l.windowSeconds }),
  knownAtS: fc.option(fc.integer({ min: 0, max: 20 * 60 }), { freq: 8 }),
  learner: fc.constantFrom<Region>('home', 'peer'),
  answerLagMs: fc.integer({ min: 0, max: 3000 }),
});

const burstArb = fc.record({
  region: fc.constantFrom<Region>('home', 'peer'),
  atS: fc.integer({ min: 0, max: 24 * 60 }),
  lengthS: fc.integer({ min: 5, max: 90 }),
  factor: fc.double({ min: 2, max: 8, noNaN: true }),
});

export const regionsScenarioArb = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  minutes: fc.integer({ min: 6, max: 24 }),
  /** Both Regions' asks per second together (the minute limit serves 0.83). */
  rate: fc.double({ min: 0.2, max: 2.5, noNaN: true }),
  /** Home's part of the demand, and where it moves to at `shiftAtS` (if ever). */
  split: fc.double({ min: 0, max: 1, noNaN: true }),
  shiftTo: fc.option(fc.double({ min: 0, max: 1, noNaN: true })),
  shiftAtS: fc.integer({ min: 30, max: 24 * 60 }),
  bursts: fc.array(burstArb, { maxLength: 3 }),
  loss: fc.option(
    fc.record({
      region: fc.constantFrom<Region>('home', 'peer'),
      atS: fc.integer({ min: 20, max: 20 * 60 }),
      backAfterS: fc.option(fc.integer({ min: 10, max: 10 * 60 })),
    }),
  ),
  partition: fc.option(
    fc.record({
      region: fc.constantFrom<Region>('home', 'peer'),
      atS: fc.integer({ min: 0, max: 20 * 60 }),
      lengthS: fc.integer({ min: 5, max: 10 * 60 }),
    }),
  ),
  /**
   * Home's DynamoDB clock minus peer's, as a share of what the bound leaves them beside the two renewers' own
   * tolerance (renewer-clock.ts): the ends are the worst and drawn often.
   */
  skew: fc.oneof(fc.constantFrom(-1, 1), fc.double({ min: -1, max: 1, noNaN: true })),
  renewers: fc.record({ home: renewersArb, peer: renewersArb }),
  /** Pauses before a renewer's calls: a slow run's adoption landing after a newer run's. */
  stalls: fc.record({
    probability: fc.double({ min: 0, max: 0.3, noNaN: true }),
    maxMs: fc.integer({ min: 0, max: 20_000 }),
  }),
  failure: fc.double({ min: 0, max: 0.3, noNaN: true }),
  lostAnswer: fc.double({ min: 0, max: 0.2, noNaN: true }),
  latencyMaxMs: fc.integer({ min: 20, max: 1500 }),
  /** The bound holds whatever the targets: both ways of setting them are drawn. */
  targets: fc.constantFrom<'free' | 'fractions'>('free', 'fractions'),
  /** A learned class in both Regions, in two runs of three. */
  learned: fc.option(learnedArb, { freq: 3 }),
});
export type RegionsScenario = typeof regionsScenarioArb extends fc.Arbitrary<infer T> ? T : never;

/**
 * Where a learned class is put to it in both Regions: the class learned within the first two minutes, asked for in
 * both Regions (each with a quarter to three quarters of the demand, no shift).
 */
export const learnedScenarioArb = fc
  .tuple(
    regionsScenarioArb,
    learnedArb,
    fc.double({ min: 0.25, max: 0.75, noNaN: true }),
    fc.integer({ min: 0, max: 120 }),
  )
  .map(
    ([scenario, learned, split, knownAtS]): RegionsScenario => ({
      ...scenario,
      split,
      shiftTo: null,
      learned: { ...learned, knownAtS },
    }),
  );

/** The most two Regions' DynamoDB clocks may differ: the bound less both renewers' tolerance. */
const REGIONS_APART_MS = CLOCK_BOUND_MS * (1 - 2 * RENEWER_CLOCK_SHARE);

export function simOptionsOf(s: RegionsScenario): RegionsSimOptions {
  const plan = (region: Region): RegionPlan => ({
    clockOffsetMs: ((region === 'home' ? 1 : -1) * s.skew * REGIONS_APART_MS) / 2,
    renewers: s.renewers[region].map((clockOffsetMs) => ({ clockOffsetMs })),
    ...(s.loss?.region === region
      ? {
          lostAt: s.loss.atS * 1000,
          ...(s.loss.backAfterS !== null ? { backAt: (s.loss.atS + s.loss.backAfterS) * 1000 } : {}),
        }
      : {}),
    ...(s.partition?.region === region
      ? { partitions: [{ from: s.partition.atS * 1000, to: (s.partition.atS + s.partition.lengthS) * 1000 }] }
      : {}),
  });
  return {
    random: seededRandom(s.seed),
    durationMs: s.minutes * MINUTE_MS,
    limits: rateLimitSettingsSchema.parse(s.learned ? { classes: { [LEARNED_CLASS]: [] } } : {}),
    demand: (region, t) => {
      const home = s.shiftTo !== null && t >= s.shiftAtS * 1000 ? s.shiftTo : s.split;
      const part = region === 'home' ? home : 1 - home;
      const burst = s.bursts
        .filter((b) => b.region === region && t >= b.atS * 1000 && t < (b.atS + b.lengthS) * 1000)
        .reduce((f, b) => f * b.factor, 1);
      return s.rate * part * burst;
    },
    regions: { home: plan('home'), peer: plan('peer') },
    store: { failure: s.failure, lostAnswer: s.lostAnswer, latencyMs: [10, s.latencyMaxMs] },
    stalls: s.stalls,
    targets: s.targets,
    ...(s.learned
      ? {
          learned: {
            name: LEARNED_CLASS,
            limits: s.learned.limits,
            part: s.learned.part,
            ...(s.learned.knownAtS !== null ? { knownAt: s.learned.knownAtS * 1000 } : {}),
            learner: s.learned.learner,
            answerLagMs: s.learned.answerLagMs,
          },
        }
      : {}),
  };
}
