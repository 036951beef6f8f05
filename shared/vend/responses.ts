import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { MethodNotAllowedError, VendError } from './vend-errors.js';

export type VendResult = APIGatewayProxyStructuredResultV2 & {
  statusCode: number;
  headers: Record<string, string>;
  body?: string;
};

/** Every answer may concern a token or its quota: never let a cache or a proxy keep it. */
const BASE_HEADERS = {
  'content-type': 'application/json',
  'cache-control': 'no-store',
} as const;

export function jsonResult(
  statusCode: number,
  body: unknown,
  headers: Record<string, string> = {},
): VendResult {
  return { statusCode, headers: { ...BASE_HEADERS, ...headers }, body: JSON.stringify(body) };
}

export function noContentResult(): VendResult {
  return { statusCode: 204, headers: { 'cache-control': 'no-store' } };
}

/** The vendor's error body (vendor-api.md §7), so consumers parse the broker's errors like the vendor's. */
export interface ErrorBody {
  errorStatus: number;
  errorCode: string;
  errorMessage: string;
  /** ISO 8601 UTC with milliseconds. */
  timestamp: string;
  /** The Function URL / Lambda request id, to quote when asking for help. */
  requestId: string;
  details?: Record<string, unknown>;
}

/**
 * Maps anything thrown to an answer. Only VendError messages are shown to callers; anything else is a
 * bug or an outage of ours and becomes a plain 500 whose detail stays in the logs.
 */
export function errorResult(error: unknown, requestId: string, now: number): VendResult {
  const vendError = error instanceof VendError ? error : undefined;
  const status = vendError?.status ?? 500;
  const body: ErrorBody = {
    errorStatus: status,
    errorCode: vendError?.code ?? 'INTERNAL_ERROR',
    errorMessage: vendError?.message ?? 'internal error; quote the requestId when reporting it',
    timestamp: new Date(now).toISOString(),
    requestId,
    ...(vendError?.details ? { details: vendError.details } : {}),
  };
  const headers: Record<string, string> = { 'x-request-id': requestId };
  if (vendError?.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(vendError.retryAfterSeconds);
  if (error instanceof MethodNotAllowedError) headers.allow = error.allow.join(', ');
  return jsonResult(status, body, headers);
}
