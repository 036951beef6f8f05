import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { quotaScopeRun } from './support/lifecycle-sims.js';
import { propertyRuns } from './support/property-runs.js';

/**
 * Two live tokens after a re-login (the previous one stays valid at the vendor), four consumers saturating them
 * through permits. The sandbox counts its 50 a minute per token or per user. Each run is 2 simulated minutes in
 * `npm test`, 3 in `npm run test:long` (docs/testing.md).
 */
const MINUTES = propertyRuns({ quick: 2, full: 3 });
/** One token's budget over the run: its minutes' 50 each, plus one window the start may straddle. */
const ONE_BUDGET = (MINUTES + 1) * 50;
let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('quota scope across a re-login', () => {
  it('user: no vendor 429 when the vendor counts per user; one budget of 50 a minute for both tokens', async () => {
    const r = await quotaScopeRun(dynamo, 'user', 'user', MINUTES * 60);
    expect(r.vendor429).toBe(0);
    expect(r.vendorAccepted).toBeGreaterThan(0);
    // At most the run's minutes' budgets of one token (plus one window the start may straddle).
    expect(r.vendorAccepted).toBeLessThanOrEqual(ONE_BUDGET);
  }, 120_000);

  it('token: the budget of each token, as before, when the vendor counts per token (no 429 either)', async () => {
    const r = await quotaScopeRun(dynamo, 'token', 'token', MINUTES * 60);
    expect(r.vendor429).toBe(0);
    expect(r.vendorAccepted).toBeGreaterThan(ONE_BUDGET);
  }, 120_000);

  it('token with a vendor that counts per user: the two tokens together overrun it (what scope user is for)', async () => {
    const r = await quotaScopeRun(dynamo, 'token', 'user', MINUTES * 60);
    expect(r.vendor429).toBeGreaterThan(0);
  }, 120_000);
});
