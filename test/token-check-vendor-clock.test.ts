import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DATE_LAG_MS } from '../shared/ledger/ledger-clock.js';
import {
  hardFloorSeconds,
  LOGIN_ROUND_TRIP_ALLOWANCE_MS,
  UNMEASURED_VENDOR_OFFSET_MS,
  validitySeconds,
  vendorOffsetOf,
} from '../shared/tokens/index.js';
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

/**
 * The vendor's clock against the ledger's (DynamoDB's) for the rate ledger: the same Date, less what the refresher
 * knew of its own clock against DynamoDB's. The truth is always inside; the width is the Date's second, the round
 * trip, the Date's allowed lateness and the DynamoDB estimate's width, nothing more.
 */
describe("the vendor's clock against the ledger's, at login", () => {
  it('holds the true offset, whatever the clocks and the timing, and is no wider than what was not known', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -600_000, max: 600_000 }),
        fc.integer({ min: -120_000, max: 120_000 }),
        fc.integer({ min: 0, max: 1200 }),
        fc.integer({ min: 0, max: 1200 }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (vendorMinusDynamo, dynamoMinusOurs, below, above, phaseMs, rttMs, stampShare) => {
          const { result, now } = login({
            sentAt: T0 + phaseMs,
            skewMs: vendorMinusDynamo + dynamoMinusOurs,
            stampAfterMs: Math.floor(stampShare * rttMs),
            rttMs,
          });
          // What the refresher's DynamoDB answers told: an interval around the truth, of any width.
          const dynamo = { lo: dynamoMinusOurs - below, hi: dynamoMinusOurs + above };
          const { token, vendorClockSkewSeconds } = checkLoginResult(result, set, now, dynamo);
          const offset = token.vendorOffsetMs as { lo: number; hi: number };
          expect(offset.lo).toBeLessThanOrEqual(vendorMinusDynamo);
          expect(offset.hi).toBeGreaterThanOrEqual(vendorMinusDynamo);
          expect(offset.hi - offset.lo).toBe(1000 + rttMs + DATE_LAG_MS + below + above);
          // The validity decisions' skew is untouched: the top of the Date's own interval, on our clock.
          expect(vendorClockSkewSeconds).toBe(((result.vendorDate as number) + 1000 - (T0 + phaseMs)) / 1000);
          expect(vendorOffsetOf(token)).toEqual(offset);
        },
      ),
      { seed: 4021, numRuns: 2000 },
    );
  });

  it('without an estimate of DynamoDB’s clock, takes ours as DynamoDB’s: the Date’s own interval', () => {
    const { result, now } = login({ sentAt: T0 + 300, skewMs: 120_000, stampAfterMs: 20, rttMs: 40 });
    const { token } = checkLoginResult(result, set, now);
    // Stamped at our T0 + 320 ms, the vendor's T0 + 120.32 s: the Date says T0 + 120 s.
    expect(token.vendorOffsetMs).toEqual({ lo: 120_000 - 340, hi: 120_000 + 1000 + DATE_LAG_MS - 300 });
  });

  it('stores nothing when the answer had no Date: the token reads as unmeasured', () => {
    const { result, now } = login({ sentAt: T0, skewMs: 0, stampAfterMs: 0, rttMs: 5 });
    delete result.vendorDate;
    const { token } = checkLoginResult(result, set, now, { lo: -5, hi: 5 });
    expect(token).not.toHaveProperty('vendorOffsetMs');
    expect(token).not.toHaveProperty('vendorClockSkewSeconds');
    expect(vendorOffsetOf(token)).toEqual(UNMEASURED_VENDOR_OFFSET_MS);
  });
});

describe('vendorOffsetOf, for tokens written without the field', () => {
  const skewOnlyRun = fc.tuple(
    fc.integer({ min: -600_000, max: 600_000 }),
    fc.integer({ min: 0, max: 999 }),
    fc.integer({ min: 0, max: LOGIN_ROUND_TRIP_ALLOWANCE_MS }),
    fc.double({ min: 0, max: 1, noNaN: true }),
  );
  const loginOf = ([skewMs, phaseMs, rttMs, stampShare]: [number, number, number, number]) =>
    login({ sentAt: T0 + phaseMs, skewMs, stampAfterMs: Math.floor(stampShare * rttMs), rttMs });

  it('from vendorClockSkewSeconds to the ms (this release before the field): its top, down by the Date’s second and the longest round trip', () => {
    fc.assert(
      fc.property(skewOnlyRun, (run) => {
        const { result, now } = loginOf(run);
        // Written without the interval; our clock is taken as DynamoDB's.
        const { vendorOffsetMs: _dropped, ...written } = checkLoginResult(result, set, now).token;
        const offset = vendorOffsetOf(written);
        expect(offset.lo).toBeLessThanOrEqual(run[0]);
        expect(offset.hi).toBeGreaterThanOrEqual(run[0]);
        // A whole second could also be release N-1's kind (below): the union.
        const whole = Number.isInteger(written.vendorClockSkewSeconds);
        expect(offset.hi - offset.lo).toBe(
          whole
            ? 3000 + 2 * LOGIN_ROUND_TRIP_ALLOWANCE_MS + DATE_LAG_MS
            : 1000 + LOGIN_ROUND_TRIP_ALLOWANCE_MS + DATE_LAG_MS,
        );
      }),
      { seed: 77, numRuns: 2000 },
    );
  });

  it('from vendorClockSkewSeconds in whole seconds, truncated toward zero (release N-1): holds the truth', () => {
    fc.assert(
      fc.property(skewOnlyRun, (run) => {
        const { result, now } = loginOf(run);
        // As release N-1 computes and stores it (test/previous-release.json's commit, shared/tokens/token-check.ts).
        const skew = Math.trunc(((result.vendorDate as number) - now) / 1000) || 0;
        const offset = vendorOffsetOf({ vendorClockSkewSeconds: skew });
        expect(offset.lo).toBeLessThanOrEqual(run[0]);
        expect(offset.hi).toBeGreaterThanOrEqual(run[0]);
      }),
      { seed: 78, numRuns: 2000 },
    );
  });

  it('with no measurement at all: ±1 s around 0, the vendor’s clock taken as ours as the validity decisions take it', () => {
    expect(vendorOffsetOf({})).toEqual({ lo: -1000, hi: 1000 });
    // A copy: a caller changing it changes no one else's.
    const first = vendorOffsetOf({});
    first.lo = 0;
    expect(vendorOffsetOf({})).toEqual({ lo: -1000, hi: 1000 });
  });
});
