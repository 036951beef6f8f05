import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ClaimRule, type RegionsSimResult, simulateRegions } from '../local/regions-sim.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { CLOCK_BOUND_MS } from '../shared/regions/lease.js';
import { propertyRuns } from './support/property-runs.js';
import { type RegionsScenario, regionsScenarioArb, simOptionsOf } from './support/regions-scenarios.js';
import { seededRandom } from './support/sandbox-http.js';

/**
 * Issue 27's property, in simulated time (local/regions-sim.ts): two Regions, each a regional ledger held to its
 * leased share (the real ledger's rings), renewing one lease item every 10 s through a lease store that fails,
 * loses answers of applied writes and is cut off by partitions; Regions lost and back; clocks apart by up to the
 * bound; demand split, shifted, bursting. The vendor's exact sliding windows over every request sent (within its
 * permit's validity): no request over 50 in any 60 s nor 1000 in any 3600 s, over 1000 runs. The two controls
 * run the same scenarios through the same check, which must catch them: it can fail.
 */
// `npm test` runs the first of the runs of test:long (the same seed), the controls on the same scenarios.
const RUNS = propertyRuns({ quick: 300, full: 1000 });
const CONTROL_RUNS = propertyRuns({ quick: 100, full: 300 });
const SEED = Number(process.env.REGIONS_PROPERTY_SEED ?? 20_261_128);
const LIMITS = [50, 1000];

function runAll(rule: ClaimRule, runs: number): { scenario: RegionsScenario; result: RegionsSimResult }[] {
  const samples = fc.sample(regionsScenarioArb, { numRuns: runs, seed: SEED });
  return samples.map((scenario) => ({
    scenario,
    result: simulateRegions({ ...simOptionsOf(scenario), claimRule: rule }),
  }));
}

describe('two Regions on leased shares', () => {
  it(`never lets the vendor see more than a limit in any span (${RUNS} random runs)`, () => {
    let askedPastFence = 0;
    let partitionedOrLost = 0;
    fc.assert(
      fc.property(regionsScenarioArb, (scenario) => {
        const result = simulateRegions(simOptionsOf(scenario));
        expect(result.vendor.rejected).toBe(0);
        result.vendor.mostInAnySpan.forEach((most, i) => {
          expect(most).toBeLessThanOrEqual(LIMITS[i] as number);
        });
        // The grant path never calls the lease store; a Region grants nothing past the fence of its record.
        expect(result.storeCallsOnGrantPath).toBe(0);
        expect(result.grantsPastFence).toBe(0);
        askedPastFence += result.asksPastFence;
        if (scenario.loss || scenario.partition) partitionedOrLost++;
      }),
      { numRuns: RUNS, seed: SEED },
    );
    // The fence was put to the test: Regions were asked for permits after their fence, in runs that cut them off.
    expect(askedPastFence).toBeGreaterThan(0);
    expect(partitionedOrLost).toBeGreaterThan(RUNS / 4);
  });

  it('the same check catches each Region holding the full budget', () => {
    const runs = runAll('full-budget', CONTROL_RUNS);
    expect(runs.filter((r) => r.result.vendor.rejected > 0).length).toBeGreaterThan(0);
  });

  it("the same check catches a claim that counts only the other Region's current share", () => {
    const runs = runAll('share-only', CONTROL_RUNS);
    expect(runs.filter((r) => r.result.vendor.rejected > 0).length).toBeGreaterThan(0);
  });
});

describe('a Region cut off from the lease store', () => {
  const limits = rateLimitSettingsSchema.parse({});
  const partition = { from: 5 * 60_000, to: 15 * 60_000 };
  const result = simulateRegions({
    random: seededRandom(27),
    durationMs: 20 * 60_000,
    limits,
    demand: () => 0.6,
    regions: {
      home: { clockOffsetMs: CLOCK_BOUND_MS / 2 },
      peer: { clockOffsetMs: -CLOCK_BOUND_MS / 2, partitions: [partition] },
    },
  });
  const peerFence = Math.max(
    ...result.adoptions.filter((a) => a.region === 'peer' && a.t < partition.from).map((a) => a.fenceAt),
  );

  it('grants nothing beyond its floor (0) once its lease has expired, while its services keep asking', () => {
    expect(result.asksPastFence).toBeGreaterThan(100);
    expect(result.grantsPastFence).toBe(0);
    // Its last fence falls within a lease of the partition's start, and it adopted none later until it ended.
    expect(peerFence).toBeLessThan(partition.from + 30_000);
    expect(
      result.adoptions
        .filter((a) => a.region === 'peer' && a.t > partition.from && a.t < partition.to)
        .every((a) => a.fenceAt <= peerFence),
    ).toBe(true);
    expect(result.vendor.rejected).toBe(0);
  });

  it('the other Region takes the whole minute budget while the peer is fenced', () => {
    const home = result.adoptions.filter(
      (a) => a.region === 'home' && a.t > partition.from && a.t < partition.to,
    );
    const minute = result.budgets[0]?.key ?? '';
    expect(home.some((a) => a.shares[minute] === 50)).toBe(true);
  });

  it('made no lease-store call on the grant path, and renewed every 10 s or so outside the partition', () => {
    expect(result.storeCallsOnGrantPath).toBe(0);
    expect(result.storeWrites.home).toBeGreaterThanOrEqual(115);
  });
});
