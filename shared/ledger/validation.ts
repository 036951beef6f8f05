import type { RateLimitSettings } from '../config/rate-limits.js';
import { InvalidLedgerRequestError, InvalidPermitCountError, ReceiptRejectedError } from './errors.js';
import { type LimitPlan, planFor } from './limit-plan.js';
import { checkClass, checkTokenId } from './operations/index.js';
import { parseReceipt } from './receipts.js';
import type { VendorFeedback } from './vendor-feedback.js';

/**
 * Input checks of the give-back and the vendor's feedback, before anything is read or written (a permit's, on its
 * plan: limit-plan.ts checkPermit). The vend API maps the errors' codes to 400s.
 */

/** Receipts are about 100 characters; anything much longer is not one. */
export const MAX_RECEIPT_LENGTH = 256;

/** A vendor asking for more than a day of silence is not believed; the report is refused as malformed. */
const MAX_RETRY_AFTER_SECONDS = 86_400;

/**
 * The largest vendor clock offset (vendor minus ledger, ms) a report may carry: the 900 s a credential set accepts
 * by default at login (maxClockSkewSeconds), and 15 s for the interval's own width beyond it (the Date's second or
 * two, a login's round trip of at most the vendor client's 10 s timeout, the refresher's clock against DynamoDB's:
 * shared/tokens/vendor-offset.ts). The vend API leaves out an offset beyond it (acceptedVendorOffset), which a set
 * configured to accept more, or a refresher clock far off DynamoDB's, can give; one here is the broker's bug.
 */
export const MAX_VENDOR_OFFSET_MS = 915_000;

/** Whether an offset interval is one a report may carry (checkFeedback refuses any other). */
export const acceptedVendorOffset = (offset: { lo: number; hi: number }): boolean =>
  Number.isFinite(offset.lo) &&
  Number.isFinite(offset.hi) &&
  offset.lo <= offset.hi &&
  Math.abs(offset.lo) <= MAX_VENDOR_OFFSET_MS &&
  Math.abs(offset.hi) <= MAX_VENDOR_OFFSET_MS;

export function checkGiveBack(request: {
  tokenId: unknown;
  count: unknown;
  receipt: unknown;
  limits: RateLimitSettings;
}): {
  tokenId: string;
  plan: LimitPlan;
  count: number;
  receipt: NonNullable<ReturnType<typeof parseReceipt>>;
} {
  const tokenId = checkTokenId(request?.tokenId);
  const plan = planFor(request.limits);
  const { count } = request;
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1)
    throw new InvalidPermitCountError('count must be an integer ≥ 1');
  const receipt =
    typeof request.receipt === 'string' && request.receipt.length <= MAX_RECEIPT_LENGTH
      ? parseReceipt(request.receipt)
      : undefined;
  if (!receipt) throw new ReceiptRejectedError('MALFORMED', 'not a receipt of a permit grant');
  return { tokenId, plan, count, receipt };
}

export function checkFeedback(report: {
  tokenId: unknown;
  class?: unknown;
  limits: RateLimitSettings;
  retryAfterSeconds?: unknown;
  limit?: unknown;
  remaining?: unknown;
  reset?: unknown;
  vendorOffsetMs?: unknown;
}): {
  tokenId: string;
  plan: LimitPlan;
  feedback: VendorFeedback;
  /** The report's vendor clock offset, checked (absent when the report had none). */
  vendorOffsetMs?: { lo: number; hi: number };
} {
  const tokenId = checkTokenId(report?.tokenId);
  const plan = planFor(report.limits);
  const feedback: VendorFeedback = {};
  const field = (
    name: Exclude<keyof VendorFeedback, 'class' | 'resetMs' | 'resetWidthMs' | 'classWindowMs' | 'planUntil'>,
    ok: (value: number) => boolean,
    rule: string,
  ) => {
    const value = report[name];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value))
      throw new InvalidLedgerRequestError(`${name} must be ${rule}`);
    feedback[name] = value;
  };
  field(
    'retryAfterSeconds',
    (v) => v >= 0 && v <= MAX_RETRY_AFTER_SECONDS,
    `0 to ${MAX_RETRY_AFTER_SECONDS}`,
  );
  field('limit', (v) => Number.isSafeInteger(v) && v >= 1, 'an integer ≥ 1');
  field('remaining', (v) => Number.isSafeInteger(v) && v >= 0, 'an integer ≥ 0');
  field('reset', (v) => v > 0 && v < 1e11, 'a Unix timestamp in seconds');
  const cls = checkClass(plan, report.class);
  if (cls !== undefined) feedback.class = cls;
  const vendorOffsetMs = checkVendorOffset(report.vendorOffsetMs);
  return vendorOffsetMs ? { tokenId, plan, feedback, vendorOffsetMs } : { tokenId, plan, feedback };
}

/**
 * The vend API sets the offset from the token it looked up, never from the consumer's body: a bad one is the
 * broker's bug, not bad input, so it is a RangeError (a plain 500), not a 400 that would blame the consumer.
 */
function checkVendorOffset(offset: unknown): { lo: number; hi: number } | undefined {
  if (offset === undefined) return undefined;
  const { lo, hi } = (offset ?? {}) as { lo?: unknown; hi?: unknown };
  if (typeof lo !== 'number' || typeof hi !== 'number' || !acceptedVendorOffset({ lo, hi }))
    throw new RangeError(
      `vendorOffsetMs must be finite numbers lo ≤ hi within ±${MAX_VENDOR_OFFSET_MS} ms (a broker bug, not the consumer's)`,
    );
  return { lo, hi };
}
