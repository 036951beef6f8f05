import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hardFloorSeconds, validitySeconds } from '../shared/tokens/index.js';
import { checkLoginResult } from '../shared/tokens/token-check.js';
import type { LoginResult } from '../shared/vendor-client/types.js';
import { credentialSet } from './support/refresher-harness.js';

/**
 * The vendor's clock from its `Date` header (whole seconds, stamped somewhere between our sending the login and
 * our reading the answer): whatever the true offset and the timing, a token's remaining life, as every later
 * decision reads it through the stored skew, is never more than the vendor would say.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LIFETIME_SECONDS = 14_400;
const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: 'https://vendor.example.com' });

/** A login answered by a vendor `skewMs` ahead of us: stamped `stampAfterMs`, read `rttMs` after we sent it. */
function login(options: { sentAt: number; skewMs: number; stampAfterMs: number; rttMs: number }) {
  const { sentAt, skewMs, stampAfterMs, rttMs } = options;
  const vendorAtStamp = sentAt + stampAfterMs + skewMs;
  const issuedAt = Math.floor(vendorAtStamp / 1000);
  const result: LoginResult = {
    userDetails: { username: 'advisor', userKey: 'u-1', groups: [1] },
    roles: ['ADVISOR'],
    accessToken: 'not-a-real-token',
    executionPlatformKey: 'ep',
    tenant: 'tenant',
    defaultCompanyInventorySource: 'source',
    status: 'SUCCESS',
    companyKey: 'company',
    exp: issuedAt + LIFETIME_SECONDS,
    issuedAt,
    vendorDate: Math.floor(vendorAtStamp / 1000) * 1000,
    requestSentAt: sentAt,
  };
  return { result, now: sentAt + rttMs };
}

describe("the vendor's clock at login", () => {
  it('is taken as far ahead as its Date allows: a vendor 1.999 s ahead does not read as 0', () => {
    // Sent at T0 + 1 s by ours; the vendor stamps at its T0 + 2.999 s (1.999 s ahead), read 1 ms later.
    const { result, now } = login({ sentAt: T0 + 1000, skewMs: 1999, stampAfterMs: 0, rttMs: 1 });
    const { token, vendorClockSkewSeconds } = checkLoginResult(result, set, now);
    expect(vendorClockSkewSeconds).toBe(2);
    // The vendor says exp − 1.999 s of ours; the broker must not think more is left.
    const trulyLeftAt = (t: number) => Math.floor(result.exp - (t + 1999) / 1000);
    expect(validitySeconds(token, now)).toBeLessThanOrEqual(trulyLeftAt(now));
    expect(token.usableUntil).toBeLessThanOrEqual(
      (result.exp - hardFloorSeconds(set, LIFETIME_SECONDS)) * 1000 - 1999,
    );
  });

  it('never overstates a token’s remaining life, and errs by at most the round trip and the Date’s second', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -600_000, max: 600_000 }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (skewMs, phaseMs, rttMs, stampShare) => {
          const sentAt = T0 + phaseMs;
          const stampAfterMs = Math.floor(stampShare * rttMs);
          const { result, now } = login({ sentAt, skewMs, stampAfterMs, rttMs });
          const { token, vendorClockSkewSeconds } = checkLoginResult(result, set, now);
          const stored = (vendorClockSkewSeconds as number) * 1000;
          expect(stored).toBeGreaterThanOrEqual(skewMs);
          expect(stored - skewMs).toBeLessThanOrEqual(1000 + rttMs);
          const floor = hardFloorSeconds(set, LIFETIME_SECONDS);
          expect(token.usableUntil).toBeLessThanOrEqual((result.exp - floor) * 1000 - skewMs);
          for (const later of [now, now + 3_600_000, (result.exp - 1) * 1000 - skewMs])
            expect(validitySeconds(token, later)).toBeLessThanOrEqual(
              Math.max(0, Math.floor(result.exp - (later + skewMs) / 1000)),
            );
        },
      ),
      { seed: 2307, numRuns: 2000 },
    );
  });

  it('is refused only when even the nearest offset its Date allows is beyond maxClockSkewSeconds', () => {
    const max = set.refresh.maxClockSkewSeconds * 1000;
    // Exactly at the limit, ahead or behind: accepted (the Date cannot tell it from a little less).
    for (const skewMs of [max, -max]) {
      const { result, now } = login({ sentAt: T0, skewMs, stampAfterMs: 0, rttMs: 5 });
      expect(() => checkLoginResult(result, set, now)).not.toThrow();
    }
    for (const skewMs of [max + 1000, -max - 2000]) {
      const { result, now } = login({ sentAt: T0, skewMs, stampAfterMs: 0, rttMs: 5 });
      expect(() => checkLoginResult(result, set, now)).toThrow(/CLOCK|clock is -?90\d s from ours/);
    }
  });
});
