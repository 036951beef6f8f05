import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { skewOutageRun } from './support/lifecycle-sims.js';

/**
 * The vendor's clock 400 s ahead of ours or behind it, and its login down for an hour from the first run due to
 * re-login: the old token runs into its floor and its expiry during the outage. Every vended token is called
 * with at once at the vendor (the sandbox over HTTP, on the same ManualClock plus its offset).
 */
let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('vendor clock skew with a one-hour login outage', () => {
  it.each([400, -400])(
    'vendor clock %i s: no consumer ever gets a token the vendor calls expired',
    async (offset) => {
      const r = await skewOutageRun(dynamo, offset);
      expect(r.tokensVended).toBeGreaterThan(200);
      // The outage outlasted the old token's floor: for a while there was no token to give (and none was given).
      expect(r.unavailable).toBeGreaterThan(0);
      expect(r.vendorSaidExpired).toBe(0);
      expect(r.vendorOther401).toBe(0);
      // expiresInSeconds is what the vendor would say is left, within a second.
      expect(r.maxExpiresInErrorSeconds).toBeLessThanOrEqual(1);
      // Never below the floor on the vendor's clock, and served up to it, whichever the offset: 4 h less 5 min
      // less the second the vendor's Date cannot tell (taken as passed), so on this minute grid one minute less.
      expect(r.minVendorValiditySeconds).toBeGreaterThanOrEqual(300);
      expect(r.minVendorValiditySeconds).toBeLessThanOrEqual(360);
      expect(r.oldTokenServedForSeconds).toBe(14_100 - 60);
    },
    120_000,
  );
});
