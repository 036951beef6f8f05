import { BrokerError } from '../errors.js';
import type { UnavailableCause } from './unavailable-cause.js';

/**
 * What the vend API answers when it does not answer 2xx. Each carries the HTTP status and the stable
 * `code` that ends up as `errorCode` in the vendor-shaped error body, so consumers handle the broker's
 * answers with the same switch they use for the vendor's.
 *
 * The codes are the vendor's (vendor-api.md §7) where one fits; the broker adds TOKEN_UNAVAILABLE,
 * PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED, LEDGER_UNAVAILABLE and INTERNAL_ERROR, for which the vendor has none.
 */
export abstract class VendError extends BrokerError {
  abstract readonly status: number;
  /** Whole seconds, at least 1: sent as `Retry-After` on 429 and 503. */
  readonly retryAfterSeconds: number | undefined;
  /** Machine-readable detail for the body's `details` (never a token). */
  readonly details: Record<string, unknown> | undefined;

  constructor(
    message: string,
    options: { retryAfterSeconds?: number; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfterSeconds =
      options.retryAfterSeconds === undefined ? undefined : wholeSecondsAtLeastOne(options.retryAfterSeconds);
    this.details = options.details;
  }
}

export const wholeSecondsAtLeastOne = (seconds: number): number =>
  Number.isFinite(seconds) ? Math.max(1, Math.ceil(seconds)) : 1;

export type BadRequestCode = 'MISSING_REQUIRED_FIELD' | 'INVALID_FORMAT' | 'INVALID_VALUE';

/** 400: the request itself is wrong; `field` names what (e.g. `count`, `body`, `minValiditySeconds`). */
export class BadRequestError extends VendError {
  readonly status = 400;
  readonly code: BadRequestCode;
  readonly field: string;

  /** `details`: more machine-readable detail beside the field (e.g. `maxCount` for a count too large). */
  constructor(code: BadRequestCode, field: string, problem: string, details: Record<string, unknown> = {}) {
    super(`${field}: ${problem}`, { details: { field, ...details } });
    this.code = code;
    this.field = field;
  }
}

/** 413: the body is larger than the cap; refused before it is decoded or parsed. */
export class PayloadTooLargeError extends VendError {
  readonly status = 413;
  readonly code = 'PAYLOAD_TOO_LARGE';

  constructor(maxBytes: number) {
    super(`body: larger than ${maxBytes} bytes`, { details: { field: 'body', maxBytes } });
  }
}

/** 403: the caller may not use this credential set (or has no rule at all). */
export class InsufficientPermissionsError extends VendError {
  readonly status = 403;
  readonly code = 'INSUFFICIENT_PERMISSIONS';
}

/** 404: no such route, or no such credential set. */
export class ResourceNotFoundError extends VendError {
  readonly status = 404;
  readonly code = 'RESOURCE_NOT_FOUND';
}

/** 405: the route exists, not with this method; `allow` becomes the `Allow` header. */
export class MethodNotAllowedError extends VendError {
  readonly status = 405;
  readonly code = 'METHOD_NOT_ALLOWED';
  readonly allow: readonly string[];

  constructor(allow: readonly string[]) {
    // The method is not echoed: in a hand-built event it could be any text.
    super(`method not allowed here; allowed: ${allow.join(', ')}`);
    this.allow = allow;
  }
}

/**
 * 503: no token with the requested validity could be had in time; try again after `retryAfterSeconds`. The
 * message and `details.cause` say why (the set's last known cause: a wrong password, the vendor down, a re-login
 * in progress), the same for every caller while it holds.
 */
export class TokenUnavailableError extends VendError {
  readonly status = 503;
  readonly code = 'TOKEN_UNAVAILABLE';

  /** `credentialSet`: undefined only for the list route, which concerns every set. */
  constructor(
    credentialSet: string | undefined,
    cause: UnavailableCause,
    options: { retryAfterSeconds?: number; cause?: unknown; servedTokenId?: string } = {},
  ) {
    const { servedTokenId, ...rest } = options;
    // A forced re-login that failed while the current token lasts (`servedTokenId`): consumers still get that one.
    const what =
      credentialSet === undefined
        ? 'no token state'
        : `credential set "${credentialSet}" has no ${servedTokenId ? 'new' : 'usable'} token`;
    super(`${what}: ${cause.reason} (${cause.code})`, {
      ...rest,
      details: {
        ...(credentialSet === undefined ? {} : { credentialSet }),
        cause,
        ...(servedTokenId === undefined ? {} : { servedTokenId }),
      },
    });
  }
}

/** 429: the ledger denied the permits; the same `code` the vendor uses, in the flat §7 body shape. */
export class PermitsDeniedError extends VendError {
  readonly status = 429;
  readonly code = 'RATE_LIMIT_EXCEEDED';
}

/**
 * A give-back whose receipt cannot be honoured; nothing was changed. `details.reason` says why:
 * MALFORMED / FORGED → 400 INVALID_VALUE, FOREIGN (another caller's, token's or set's) → 403
 * RESOURCE_ACCESS_DENIED, SPENT (already given back) → 409 RECEIPT_SPENT, EXPIRED → 410 RECEIPT_EXPIRED.
 * A client that re-sends a give-back whose answer it lost gets 409: the permits are back already.
 */
export class ReceiptRefusedError extends VendError {
  readonly status: number;
  readonly code: string;

  constructor(reason: 'MALFORMED' | 'FORGED' | 'FOREIGN' | 'SPENT' | 'EXPIRED', message: string) {
    super(message, { details: { field: 'receipt', reason } });
    const [status, code] = RECEIPT_ANSWERS[reason];
    this.status = status;
    this.code = code;
  }
}

const RECEIPT_ANSWERS = {
  MALFORMED: [400, 'INVALID_VALUE'],
  FORGED: [400, 'INVALID_VALUE'],
  FOREIGN: [403, 'RESOURCE_ACCESS_DENIED'],
  SPENT: [409, 'RECEIPT_SPENT'],
  EXPIRED: [410, 'RECEIPT_EXPIRED'],
} as const;

/** 503: the ledger did not answer; no permit without it (fail closed). */
export class LedgerUnavailableVendError extends VendError {
  readonly status = 503;
  readonly code = 'LEDGER_UNAVAILABLE';
}

/** The refresher could not be asked (invoke failed, or answered something unreadable). */
export class RefresherUnavailableError extends BrokerError {
  readonly code = 'REFRESHER_UNAVAILABLE';
}
