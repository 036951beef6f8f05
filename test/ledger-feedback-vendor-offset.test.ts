import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { LedgerRequestError } from '../shared/ledger/errors.js';
import { acceptedVendorOffset, checkFeedback, MAX_VENDOR_OFFSET_MS } from '../shared/ledger/validation.js';

/**
 * A report's vendor clock offset, as the ledger checks it: the vend API sets it from the token it looked up, never
 * from the consumer's body, so a bad one is the broker's bug, a plain error (a 500), never a 400 that would tell
 * the consumer its input was wrong.
 */
const limits = rateLimitSettingsSchema.parse({});
const feedback = { tokenId: 'c10c4c10c4c10c4c', limits, retryAfterSeconds: 5 };

describe("a vendor feedback report's vendorOffsetMs", () => {
  it('is optional, and passed on as given when finite, ordered and within ±MAX_VENDOR_OFFSET_MS', () => {
    expect(checkFeedback(feedback)).not.toHaveProperty('vendorOffsetMs');
    for (const offset of [
      { lo: -30_500, hi: -29_475 },
      { lo: 0, hi: 0 },
      { lo: -MAX_VENDOR_OFFSET_MS, hi: MAX_VENDOR_OFFSET_MS },
    ]) {
      const checked = checkFeedback({ ...feedback, vendorOffsetMs: offset });
      expect(checked.vendorOffsetMs).toEqual(offset);
      expect(checked.feedback).toEqual({ retryAfterSeconds: 5 });
    }
  });

  it('is 15 minutes and 15 s at most either way: the 900 s a set accepts by default, and the interval’s width', () => {
    expect(MAX_VENDOR_OFFSET_MS).toBe(915_000);
    expect(acceptedVendorOffset({ lo: 899_000, hi: 912_025 })).toBe(true);
    expect(acceptedVendorOffset({ lo: 899_000, hi: 915_001 })).toBe(false);
    expect(acceptedVendorOffset({ lo: -915_001, hi: 0 })).toBe(false);
  });

  it('refuses anything else as a programming error, not as the consumer’s bad input', () => {
    for (const offset of [
      null,
      5,
      'soon',
      {},
      { lo: 1 },
      { lo: '1', hi: 2 },
      { lo: 2, hi: 1 },
      { lo: Number.NaN, hi: 0 },
      { lo: 0, hi: Number.POSITIVE_INFINITY },
      { lo: -MAX_VENDOR_OFFSET_MS - 1, hi: 0 },
      { lo: 0, hi: MAX_VENDOR_OFFSET_MS + 1 },
      // µs where ms are meant (the vendor 120 s ahead): far beyond the bound.
      { lo: 119_500_000, hi: 120_525_000 },
    ]) {
      let error: unknown;
      try {
        checkFeedback({ ...feedback, vendorOffsetMs: offset });
      } catch (caught) {
        error = caught;
      }
      expect(error, JSON.stringify(offset)).toBeInstanceOf(RangeError);
      expect(error).not.toBeInstanceOf(LedgerRequestError);
      expect((error as Error).message).toMatch(/vendorOffsetMs must be .*a broker bug/);
    }
  });
});
