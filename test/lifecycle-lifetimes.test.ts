import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { FIXED_THRESHOLDS, lifetimeRun } from './support/lifecycle-sims.js';
import { propertyRuns } from './support/property-runs.js';

/**
 * Thresholds from each token's own lifetime: one login per token, most of each token's life in use, and the
 * outage tolerance of long tokens kept. The vend API, the refresher, the sandbox over HTTP and dynalite on a
 * ManualClock; a consumer asks for the token at every step. (24-hour figures: `npm run bench -- lifecycle`.)
 */
/**
 * The simulated hours of the long tokens' runs: `npm test` the first 12 of test:long's 24 (two 8 h tokens or more);
 * of the short tokens' runs, below, the first 2 of 3 and 4 of 6 (12 and 8 tokens or more).
 */
const LONG_TOKEN_HOURS = propertyRuns({ quick: 12, full: 24 });
let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('token lifetimes', () => {
  it.each([
    { lifetimeSeconds: 600, periodSeconds: 60, stepSeconds: 60, hours: propertyRuns({ quick: 2, full: 3 }) },
    {
      lifetimeSeconds: 1800,
      periodSeconds: 180,
      stepSeconds: 60,
      hours: propertyRuns({ quick: 4, full: 6 }),
    },
    { lifetimeSeconds: 4 * 3600, periodSeconds: 300, stepSeconds: 300, hours: LONG_TOKEN_HOURS },
    { lifetimeSeconds: 8 * 3600, periodSeconds: 300, stepSeconds: 300, hours: LONG_TOKEN_HOURS },
  ])(
    '$lifetimeSeconds s tokens: one login per token, at least 80 % of each token life in use, never a 503',
    async (c) => {
      const r = await lifetimeRun(dynamo, c);
      expect(r.tokens).toBeGreaterThanOrEqual(2);
      expect(r.loginsPerToken).toBe(1);
      expect(r.minShareInUse).toBeGreaterThanOrEqual(0.8);
      expect(r.consumerRefusals).toBe(0);
      expect(r.vendedBelowFloor).toBe(0);
      // One login per token life, not one per run: the runs that logged in are about duration / lifetime.
      expect(r.runsThatLoggedIn).toBeLessThanOrEqual(Math.ceil((c.hours * 3600) / (0.8 * c.lifetimeSeconds)));
    },
    120_000,
  );

  it('as a contrast, the fixed 60-minute threshold logs 30-minute tokens in at every run', async () => {
    const r = await lifetimeRun(dynamo, {
      lifetimeSeconds: 1800,
      periodSeconds: 300,
      stepSeconds: 300,
      hours: 3,
      refresh: FIXED_THRESHOLDS,
    });
    expect(r.runsThatLoggedIn).toBe(r.runs);
    expect(r.loginsPerToken).toBeGreaterThanOrEqual(5);
  }, 120_000);

  it('4 h tokens survive a 40-minute login outage from the soft threshold with no consumer refused', async () => {
    const r = await lifetimeRun(dynamo, {
      lifetimeSeconds: 4 * 3600,
      periodSeconds: 300,
      stepSeconds: 60,
      hours: 6,
      outageMinutes: 40,
    });
    expect(r.outageStartedWithLeftSeconds).toBeGreaterThan(0.19 * 4 * 3600 - 60);
    expect(r.consumerRefusals).toBe(0);
    expect(r.vendedBelowFloor).toBe(0);
    expect(r.loginsPerToken).toBe(1);
  }, 120_000);
});
