import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { quotaScopeRun } from './support/lifecycle-sims.js';

/**
 * Two live tokens after a re-login (the previous one stays valid at the vendor), four consumers saturating them
 * through permits. The sandbox counts its 50 a minute per token or per user.
 */
let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('quota scope across a re-login', () => {
  it('user: no vendor 429 when the vendor counts per user; one budget of 50 a minute for both tokens', async () => {
    const r = await quotaScopeRun(dynamo, 'user', 'user', 180);
    expect(r.vendor429).toBe(0);
    expect(r.vendorAccepted).toBeGreaterThan(0);
    // 180 s: at most the 3 minutes' budgets of one token (plus one window the start may straddle).
    expect(r.vendorAccepted).toBeLessThanOrEqual(4 * 50);
  }, 120_000);

  it('token: the budget of each token, as before, when the vendor counts per token (no 429 either)', async () => {
    const r = await quotaScopeRun(dynamo, 'token', 'token', 180);
    expect(r.vendor429).toBe(0);
    expect(r.vendorAccepted).toBeGreaterThan(4 * 50);
  }, 120_000);

  it('token with a vendor that counts per user: the two tokens together overrun it (what scope user is for)', async () => {
    const r = await quotaScopeRun(dynamo, 'token', 'user', 180);
    expect(r.vendor429).toBeGreaterThan(0);
  }, 120_000);
});
