import type { RateLimitSettings } from '../config/credential-sets.js';
import {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  ReceiptRejectedError,
  UnknownPermitClassError,
} from './errors.js';
import { type LimitPlan, planFor, ringsFor } from './limit-plan.js';
import { parseReceipt } from './receipts.js';
import type { VendorFeedback } from './vendor-feedback.js';

/** Receipts are about 100 characters; anything much longer is not one. */
export const MAX_RECEIPT_LENGTH = 256;

/**
 * Input checks of the ledger's operations, before anything is read or written. The vend API maps the errors'
 * codes to 400s. Messages never echo a token id: a caller may have sent the token itself by mistake.
 */
const TOKEN_ID = /^[A-Za-z0-9_-]{1,64}$/;
const CLASS_NAME = /^[a-z][a-z0-9-]{0,62}$/;
/** A vendor asking for more than a day of silence is not believed; the report is refused as malformed. */
const MAX_RETRY_AFTER_SECONDS = 86_400;

export function checkTokenId(tokenId: unknown): string {
  if (typeof tokenId !== 'string' || !TOKEN_ID.test(tokenId))
    throw new InvalidLedgerRequestError('tokenId must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -');
  return tokenId;
}

function checkClass(plan: LimitPlan, cls: unknown): string | undefined {
  if (cls === undefined) return undefined;
  if (typeof cls === 'string' && plan.classes.has(cls)) return cls;
  const known = [...plan.classes.keys()].join(', ') || 'none';
  const named = typeof cls === 'string' && CLASS_NAME.test(cls) ? ` "${cls}"` : '';
  throw new UnknownPermitClassError(`unknown permit class${named}; this credential set has: ${known}`);
}

function checkCount(plan: LimitPlan, cls: string | undefined, count: unknown): number {
  const max = Math.min(...ringsFor(plan, cls).map((spec) => spec.limit));
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > max)
    throw new InvalidPermitCountError(`count must be an integer from 1 to ${max}`);
  return count;
}

export interface CheckedPermit {
  tokenId: string;
  plan: LimitPlan;
  count: number;
  cls: string | undefined;
}

/** `plan`: the plan to check against (with the learned classes' rings as learned); default the settings'. */
export function checkPermit(
  request: {
    tokenId: unknown;
    count: unknown;
    class?: unknown;
    limits: RateLimitSettings;
  },
  plan: LimitPlan = planFor(request.limits),
): CheckedPermit {
  const tokenId = checkTokenId(request?.tokenId);
  const cls = checkClass(plan, request.class);
  return { tokenId, plan, cls, count: checkCount(plan, cls, request.count) };
}

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
}): { tokenId: string; plan: LimitPlan; feedback: VendorFeedback } {
  const tokenId = checkTokenId(report?.tokenId);
  const plan = planFor(report.limits);
  const feedback: VendorFeedback = {};
  const field = (
    name: Exclude<keyof VendorFeedback, 'class' | 'resetMs' | 'classWindowMs'>,
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
  return { tokenId, plan, feedback };
}
