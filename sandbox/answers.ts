import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { VendorErrorCode } from '../shared/vendor-client/errors.js';
import type { RateLimitState } from './rate-limiter.js';

/** What the sandbox answers, before it is written; handlers build these, the server writes them. */
export interface Answer {
  status: number;
  /** Serialized as application/json; absent = empty body. */
  json?: unknown;
  /** Sent as is (a proxy's HTML page, JSON of an unknown shape); no vendor headers added. */
  raw?: { body: string; contentType: string };
  headers?: Record<string, string>;
  /** The errorCode served, for the stats (also the nested 429 code). */
  errorCode?: string;
}

/** One request as the vendor sees it: its id and the vendor's clock. */
export interface RequestContext {
  requestId: string;
  /** Vendor clock, epoch ms. */
  now(): number;
}

export const newRequestId = (): string => `req-${randomBytes(8).toString('hex')}`;

/** The documented status of each §7 errorCode. */
export const ERROR_CODE_STATUS = {
  INVALID_CREDENTIALS: 401,
  TOKEN_EXPIRED: 401,
  TOKEN_INVALID: 401,
  TOKEN_MISSING: 401,
  INSUFFICIENT_PERMISSIONS: 403,
  WRONG_TENANT: 403,
  RESOURCE_ACCESS_DENIED: 403,
  MISSING_REQUIRED_FIELD: 400,
  INVALID_FORMAT: 400,
  INVALID_VALUE: 400,
  DUPLICATE_KEY: 409,
  GUIDELINE_VIOLATION: 422,
  INSUFFICIENT_BALANCE: 422,
  INVALID_STATE_TRANSITION: 422,
  DEPENDENCY_MISSING: 422,
  RESOURCE_NOT_FOUND: 404,
  RESOURCE_DELETED: 410,
  RATE_LIMIT_EXCEEDED: 429,
} as const satisfies Record<VendorErrorCode, number>;

/**
 * The vendor documents no errorCode for 5xx or for statuses outside §7; these are the SANDBOX'S OWN
 * INVENTION, so clients must not rely on them (a real vendor may send anything, or no JSON at all).
 */
export const SANDBOX_STATUS_CODES: Record<number, string> = {
  413: 'PAYLOAD_TOO_LARGE',
  500: 'INTERNAL_ERROR',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};

export const genericCodeFor = (status: number): string => SANDBOX_STATUS_CODES[status] ?? `HTTP_${status}`;

/** A §7 error body: errorStatus, errorCode, errorMessage, timestamp (ISO 8601 UTC, ms), requestId. */
export function errorAnswer(
  ctx: RequestContext,
  status: number,
  errorCode: string,
  errorMessage: string,
  extra: { details?: unknown; headers?: Record<string, string> } = {},
): Answer {
  return {
    status,
    errorCode,
    headers: extra.headers,
    json: {
      errorStatus: status,
      errorCode,
      errorMessage,
      timestamp: new Date(ctx.now()).toISOString(),
      requestId: ctx.requestId,
      ...(extra.details === undefined ? {} : { details: extra.details }),
    },
  };
}

/** A documented §7 code with its documented status. */
export const vendorError = (ctx: RequestContext, code: VendorErrorCode, message: string): Answer =>
  errorAnswer(ctx, ERROR_CODE_STATUS[code], code, message);

export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(state.limit),
    'X-RateLimit-Remaining': String(state.remaining),
    'X-RateLimit-Reset': String(state.reset),
  };
}

/** §8: 429 with Retry-After and the nested body, not the §7 one. */
export function rateLimitAnswer(state: RateLimitState, retryAfterSeconds: number): Answer {
  return {
    status: 429,
    errorCode: 'RATE_LIMIT_EXCEEDED',
    headers: { ...rateLimitHeaders(state), 'Retry-After': String(retryAfterSeconds) },
    json: {
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: `Rate limit exceeded: ${state.limit} requests allowed in the window`,
        details: { limit: state.limit, reset: state.reset },
      },
    },
  };
}

/** Writes the answer with the vendor clock's Date header; vendor answers also carry X-Request-Id. */
export function writeAnswer(res: ServerResponse, answer: Answer, ctx: RequestContext): void {
  if (res.headersSent || res.destroyed) return;
  res.sendDate = false;
  const headers: Record<string, string> = { Date: new Date(ctx.now()).toUTCString() };
  let body = '';
  if (answer.raw) {
    body = answer.raw.body;
    headers['Content-Type'] = answer.raw.contentType;
  } else {
    headers['X-Request-Id'] = ctx.requestId;
    if (answer.json !== undefined) {
      body = JSON.stringify(answer.json);
      headers['Content-Type'] = 'application/json; charset=utf-8';
    }
  }
  Object.assign(headers, answer.headers);
  // RFC 9110: no Content-Length on 204.
  if (answer.status !== 204) headers['Content-Length'] = String(Buffer.byteLength(body));
  res.writeHead(answer.status, headers);
  res.end(body);
}
