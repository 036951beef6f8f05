import { BrokerError } from '../errors.js';
import type { RateLimitHeaders } from './types.js';

/** Every `errorCode` of vendor-api.md §7. */
export const VENDOR_ERROR_CODES = [
  'INVALID_CREDENTIALS',
  'TOKEN_EXPIRED',
  'TOKEN_INVALID',
  'TOKEN_MISSING',
  'INSUFFICIENT_PERMISSIONS',
  'WRONG_TENANT',
  'RESOURCE_ACCESS_DENIED',
  'MISSING_REQUIRED_FIELD',
  'INVALID_FORMAT',
  'INVALID_VALUE',
  'DUPLICATE_KEY',
  'GUIDELINE_VIOLATION',
  'INSUFFICIENT_BALANCE',
  'INVALID_STATE_TRANSITION',
  'DEPENDENCY_MISSING',
  'RESOURCE_NOT_FOUND',
  'RESOURCE_DELETED',
  'RATE_LIMIT_EXCEEDED',
] as const;
export type VendorErrorCode = (typeof VENDOR_ERROR_CODES)[number];

/** Base of everything that went wrong talking to the vendor. */
export abstract class VendorError extends BrokerError {
  /** HTTP status of the vendor's answer, when there was one. */
  readonly status: number | undefined;
  /** Whether the vendor's rules allow trying again (429, 500, 502, 503, 504, network, timeout). */
  abstract readonly retryable: boolean;

  constructor(message: string, status: number | undefined, options?: { cause?: unknown }) {
    super(message, options);
    this.status = status;
  }
}

/** The vendor answered with an error body of §7 (or the nested 429 shape of §8). */
export class VendorApiError extends VendorError {
  /** The vendor's `errorCode` (one of VENDOR_ERROR_CODES, or an undocumented one kept as sent). */
  readonly code: string;
  readonly vendorMessage: string;
  readonly timestamp: string | undefined;
  readonly requestId: string | undefined;
  readonly details: unknown;
  readonly retryable: boolean;

  constructor(init: {
    status: number;
    code: string;
    vendorMessage: string;
    timestamp?: string;
    requestId?: string;
    details?: unknown;
  }) {
    super(`vendor answered ${init.status} ${init.code}: ${init.vendorMessage}`, init.status);
    this.code = init.code;
    this.vendorMessage = init.vendorMessage;
    this.timestamp = init.timestamp;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryable = [500, 502, 503, 504].includes(init.status);
  }
}

/** 429 RATE_LIMIT_EXCEEDED (§8): wait `retryAfterSeconds` before trying again. */
export class VendorRateLimitError extends VendorApiError {
  override readonly retryable = true;
  readonly retryAfterSeconds: number | undefined;
  readonly limit: number | undefined;
  /** Unix seconds. */
  readonly reset: number | undefined;
  readonly rateLimit: RateLimitHeaders;

  constructor(init: {
    vendorMessage: string;
    retryAfterSeconds?: number;
    limit?: number;
    reset?: number;
    rateLimit: RateLimitHeaders;
    requestId?: string;
    timestamp?: string;
  }) {
    super({ status: 429, code: 'RATE_LIMIT_EXCEEDED', ...init });
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.limit = init.limit;
    this.reset = init.reset;
    this.rateLimit = init.rateLimit;
  }
}

/** The vendor's answer was neither of its documented shapes (not JSON, or JSON of another shape). */
export class UnexpectedVendorResponseError extends VendorError {
  readonly code = 'UNEXPECTED_VENDOR_RESPONSE';
  readonly retryable: boolean;
  /** A `Retry-After` header that came with it (e.g. a proxy's 429 or 503 page). */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, reason: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(
      `unexpected vendor response (HTTP ${status}): ${reason}`,
      status,
      options && 'cause' in options ? { cause: options.cause } : undefined,
    );
    // 429 too: the vendor asks for a retry on 429 whatever the body looks like (§7 diagnostic rules).
    this.retryable = [429, 500, 502, 503, 504].includes(status);
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

/** The vendor could not be reached (DNS, connection refused or reset). */
export class VendorUnreachableError extends VendorError {
  readonly code = 'VENDOR_UNREACHABLE';
  readonly retryable = true;
  /**
   * True only when the connection failed before any of the request was written (name resolution, connection
   * refused or unreachable, connect timeout): the vendor cannot have acted on it. A reset or a close after
   * connecting is false: the request may have arrived, and a POST may have been carried out.
   */
  readonly notSent: boolean;

  constructor(message: string, status: number | undefined, options?: { cause?: unknown; notSent?: boolean }) {
    super(message, status, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.notSent = options?.notSent ?? false;
  }
}

/** The call took longer than its timeout. */
export class VendorTimeoutError extends VendorError {
  readonly code = 'VENDOR_TIMEOUT';
  readonly retryable = true;
}

/** The caller aborted the call through its signal. Never retried. */
export class VendorCallAbortedError extends VendorError {
  readonly code = 'VENDOR_CALL_ABORTED';
  readonly retryable = false;
}

/** The login succeeded but the token is unusable: no usable `exp`, already expired, malformed. */
export class VendorTokenUnusableError extends VendorError {
  readonly code = 'TOKEN_UNUSABLE';
  readonly retryable = false;
}

/** The client refuses a base URL: not HTTPS, and plain HTTP outside loopback. */
export class InsecureVendorUrlError extends VendorError {
  readonly code = 'INSECURE_VENDOR_URL';
  readonly retryable = false;
}

/** A resource path that is not of the documented shape `/users/<number>/<tenant>/serviceKey/<key>`. Nothing was sent. */
export class InvalidResourcePathError extends BrokerError {
  readonly code = 'INVALID_RESOURCE_PATH';
}

/** A call the client refuses before sending anything: empty credentials, a bad token, a body it cannot send. */
export class InvalidVendorRequestError extends BrokerError {
  readonly code = 'INVALID_VENDOR_REQUEST';
}
