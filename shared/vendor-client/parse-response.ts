import * as z from 'zod';
import { lazy } from '../lazy.js';
import {
  UnexpectedVendorResponseError,
  VendorApiError,
  type VendorError,
  VendorRateLimitError,
} from './errors.js';
import type { RateLimitHeaders } from './types.js';

/** One vendor answer as read off the wire, before interpretation. */
export interface RawVendorResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** The flat error body of vendor-api.md §7. Only code and message are required: a missing extra
 *  field must not hide an INVALID_CREDENTIALS behind a generic error. Both error shapes are built by the first
 *  error answer, not at cold start. */
const flatErrorSchema = lazy(() =>
  z.object({
    errorStatus: z.number().int().optional(),
    errorCode: z.string().min(1),
    errorMessage: z.string(),
    timestamp: z.string().optional(),
    requestId: z.string().optional(),
    details: z.unknown().optional(),
  }),
);

/** The nested rate-limit body of §8. */
const nestedErrorSchema = lazy(() =>
  z.object({
    error: z.object({
      code: z.string().min(1),
      message: z.string(),
      details: z
        .object({ limit: z.number().int().optional(), reset: z.number().optional() })
        .loose()
        .optional(),
      requestId: z.string().optional(),
    }),
    requestId: z.string().optional(),
    timestamp: z.string().optional(),
  }),
);

const integerHeader = (headers: Headers, name: string): number | undefined => {
  const value = headers.get(name)?.trim();
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
};

/** `Retry-After` in seconds: delta-seconds, or an HTTP-date measured against `nowMs`. */
export function parseRetryAfterSeconds(value: string | null, nowMs: number): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.ceil(Number(text));
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/** The `Date` header as epoch ms, for the vendor's clock skew. */
export function parseVendorDate(headers: Headers): number | undefined {
  const value = headers.get('date');
  if (!value) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : at;
}

/** `X-RateLimit-*` and `Retry-After` (§8). An HTTP-date Retry-After is read against the vendor's own `Date`. */
export function parseRateLimitHeaders(headers: Headers, nowMs: number): RateLimitHeaders {
  const rateLimit: RateLimitHeaders = {};
  const limit = integerHeader(headers, 'x-ratelimit-limit');
  const remaining = integerHeader(headers, 'x-ratelimit-remaining');
  const reset = integerHeader(headers, 'x-ratelimit-reset');
  const retryAfterSeconds = parseRetryAfterSeconds(
    headers.get('retry-after'),
    parseVendorDate(headers) ?? nowMs,
  );
  if (limit !== undefined) rateLimit.limit = limit;
  if (remaining !== undefined) rateLimit.remaining = remaining;
  if (reset !== undefined) rateLimit.reset = reset;
  if (retryAfterSeconds !== undefined) rateLimit.retryAfterSeconds = retryAfterSeconds;
  return rateLimit;
}

export function headerRequestId(headers: Headers): string | undefined {
  return headers.get('x-request-id')?.trim() || undefined;
}

export type JsonParse = { ok: true; value: unknown } | { ok: false };

/** JSON.parse that never throws; an empty body is `undefined`. */
export function parseJson(text: string): JsonParse {
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Names the fields zod rejected, never their values (a login body holds the token). */
export function describeShapeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.map(String).join('.') || '(body)'}: ${issue.message}`)
    .join('; ');
}

/** A non-2xx answer as the typed error it stands for. Never throws. */
export function toVendorError(response: RawVendorResponse, nowMs: number): VendorError {
  const { status, headers } = response;
  const json = parseJson(response.text);
  if (!json.ok)
    return new UnexpectedVendorResponseError(status, 'the body is not JSON', retryAfterOf(response, nowMs));
  const rateLimit = parseRateLimitHeaders(headers, nowMs);
  const flat = flatErrorSchema().safeParse(json.value);
  const nested = flat.success ? undefined : nestedErrorSchema().safeParse(json.value);
  if (status === 429 && (flat.success || nested?.success)) {
    const body = nested?.success ? nested.data : undefined;
    return new VendorRateLimitError({
      vendorMessage: flat.success ? flat.data.errorMessage : (body?.error.message ?? ''),
      retryAfterSeconds: rateLimit.retryAfterSeconds,
      limit: body?.error.details?.limit ?? rateLimit.limit,
      reset: body?.error.details?.reset ?? rateLimit.reset,
      rateLimit,
      requestId:
        (flat.success ? flat.data.requestId : (body?.requestId ?? body?.error.requestId)) ??
        headerRequestId(headers),
      timestamp: flat.success ? flat.data.timestamp : body?.timestamp,
    });
  }
  if (flat.success) {
    return new VendorApiError({
      status,
      code: flat.data.errorCode,
      vendorMessage: flat.data.errorMessage,
      timestamp: flat.data.timestamp,
      requestId: flat.data.requestId ?? headerRequestId(headers),
      details: flat.data.details,
    });
  }
  if (nested?.success) {
    const { error } = nested.data;
    return new VendorApiError({
      status,
      code: error.code,
      vendorMessage: error.message,
      timestamp: nested.data.timestamp,
      requestId: nested.data.requestId ?? error.requestId ?? headerRequestId(headers),
      details: error.details,
    });
  }
  return new UnexpectedVendorResponseError(
    status,
    'the JSON body is neither of the documented error shapes',
    retryAfterOf(response, nowMs),
  );
}

function retryAfterOf(response: RawVendorResponse, nowMs: number): { retryAfterSeconds?: number } {
  const retryAfterSeconds = parseRateLimitHeaders(response.headers, nowMs).retryAfterSeconds;
  return retryAfterSeconds === undefined ? {} : { retryAfterSeconds };
}
