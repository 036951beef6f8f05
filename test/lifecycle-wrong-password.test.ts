import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { wrongPasswordRun } from './support/lifecycle-sims.js';

let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('a wrong password for 24 simulated hours', () => {
  it('costs at most 10 vendor logins (waits of 15 min, 1 h, 4 h, 16 h), and a new secret version logs in on the next run', async () => {
    const r = await wrongPasswordRun(dynamo, 24);
    // A run every 5 minutes and a consumer every minute asked all day long; the vendor saw a handful.
    expect(r.tokenRequests).toBe(24 * 60);
    expect(r.vendorLoginAttempts).toBeLessThanOrEqual(10);
    expect(r.gapsSeconds).toEqual([900, 3600, 14_400, 57_600]);
    expect(r.newVersionLoggedInOnNextRun).toBe(true);
  }, 180_000);
});
