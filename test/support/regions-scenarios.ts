import fc from 'fast-check';
import type { Region, RegionPlan, RegionsSimOptions } from '../../local/regions-sim.js';
import { rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import { CLOCK_BOUND_MS } from '../../shared/regions/lease.js';
import { seededRandom } from './sandbox-http.js';

/**
 * Random two-Region runs for the simulation (local/regions-sim.ts), short enough that a thousand take seconds:
 * 6 to 24 simulated minutes (the hour limit binds after 20 minutes of a saturated minute), a demand split that may
 * shift once, bursts, a Region lost (and maybe back), a partition from the lease store, the lease store's own
 * faults, clocks that differ by up to the bound (its ends included), and either way of setting the targets.
 */
const MINUTE_MS = 60_000;

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
  /** Home's clock minus peer's, as a share of the bound: the ends are the worst and drawn often. */
  skew: fc.oneof(fc.constantFrom(-1, 1), fc.double({ min: -1, max: 1, noNaN: true })),
  failure: fc.double({ min: 0, max: 0.3, noNaN: true }),
  lostAnswer: fc.double({ min: 0, max: 0.2, noNaN: true }),
  latencyMaxMs: fc.integer({ min: 20, max: 1500 }),
  /** The bound holds whatever the targets: both ways of setting them are drawn. */
  targets: fc.constantFrom<'free' | 'fractions'>('free', 'fractions'),
});
export type RegionsScenario = typeof regionsScenarioArb extends fc.Arbitrary<infer T> ? T : never;

export function simOptionsOf(s: RegionsScenario): RegionsSimOptions {
  const plan = (region: Region): RegionPlan => ({
    clockOffsetMs: ((region === 'home' ? 1 : -1) * s.skew * CLOCK_BOUND_MS) / 2,
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
    limits: rateLimitSettingsSchema.parse({}),
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
    targets: s.targets,
  };
}
