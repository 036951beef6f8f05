import { BadRequestError, PayloadTooLargeError, ResourceNotFoundError } from './vend-errors.js';

/** What the vend API needs of a Function URL event (payload format 2.0), checked, never trusted blindly. */
export interface VendRequest {
  requestId: string;
  method: string;
  /** Decoded path segments of `rawPath` (without the leading empty one). */
  segments: string[];
  rawQueryString: string;
  /** Lower-case names, as Function URLs deliver them. */
  headers: Record<string, string>;
  /** Still encoded: decoded on demand by `readBody`, only once the route and the caller are known. */
  rawBody: string | undefined;
  isBase64Encoded: boolean;
  /** `requestContext.authorizer.iam.userArn`: the SigV4-verified caller. */
  callerArn: string | undefined;
  callerAccountId: string | undefined;
}

const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
const asString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * Reads the parts of the event the API uses. The event comes from AWS, but the local mode builds it too and
 * the fuzz test builds anything, so every field is checked; nothing here throws.
 */
export function readEvent(event: unknown, fallbackRequestId: string): VendRequest {
  const root = asRecord(event) ?? {};
  const context = asRecord(root.requestContext) ?? {};
  const http = asRecord(context.http) ?? {};
  const iam = asRecord(asRecord(context.authorizer)?.iam) ?? {};
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(asRecord(root.headers) ?? {})) {
    if (typeof value === 'string') headers[name.toLowerCase()] = value;
  }
  const requestId = asString(context.requestId);
  return {
    requestId: requestId && requestId.length <= 128 ? requestId : fallbackRequestId,
    method: (asString(http.method) ?? '').toUpperCase(),
    segments: splitPath(asString(root.rawPath) ?? asString(http.path) ?? ''),
    rawQueryString: asString(root.rawQueryString) ?? '',
    headers,
    rawBody: asString(root.body),
    isBase64Encoded: root.isBase64Encoded === true,
    callerArn: asString(iam.userArn),
    callerAccountId: asString(iam.accountId),
  };
}

/** `/v1/credential-sets/a/token` → ['v1', 'credential-sets', 'a', 'token']; undecodable parts stay as sent. */
function splitPath(rawPath: string): string[] {
  if (!rawPath.startsWith('/')) return [];
  return rawPath
    .slice(1)
    .split('/')
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        // A malformed escape can never equal a route word or a set id: it simply matches nothing.
        return segment;
      }
    });
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The body as a JSON object. Size is checked before anything is decoded; base64 (Function URLs encode
 * non-text content types) and UTF-8 are decoded strictly; anything but a JSON object is refused.
 */
export function readJsonBody(request: VendRequest, maxBytes: number): Record<string, unknown> {
  const raw = request.rawBody ?? '';
  let text: string;
  if (request.isBase64Encoded) {
    if (raw.length > Math.ceil(maxBytes / 3) * 4) throw new PayloadTooLargeError(maxBytes);
    if (!BASE64.test(raw)) throw new BadRequestError('INVALID_FORMAT', 'body', 'not valid base64');
    const bytes = Buffer.from(raw, 'base64');
    if (bytes.length > maxBytes) throw new PayloadTooLargeError(maxBytes);
    try {
      text = utf8.decode(bytes);
    } catch {
      throw new BadRequestError('INVALID_FORMAT', 'body', 'not valid UTF-8');
    }
  } else {
    // A JS string of n UTF-16 units is at least n bytes of UTF-8: a cheap pre-check before measuring.
    if (raw.length > maxBytes || Buffer.byteLength(raw, 'utf8') > maxBytes) {
      throw new PayloadTooLargeError(maxBytes);
    }
    text = raw;
  }
  const contentType = request.headers['content-type'];
  if (contentType !== undefined && !/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType.trim())) {
    throw new BadRequestError('INVALID_FORMAT', 'content-type', 'must be application/json');
  }
  if (text.trim() === '')
    throw new BadRequestError('MISSING_REQUIRED_FIELD', 'body', 'a JSON object is required');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BadRequestError('INVALID_FORMAT', 'body', 'not valid JSON');
  }
  const record = asRecord(value);
  if (!record) throw new BadRequestError('INVALID_FORMAT', 'body', 'must be a JSON object');
  return record;
}

/**
 * One query parameter, or undefined. Other parameters are ignored; the one asked for, given twice, is
 * refused rather than guessed.
 */
export function readQueryParameter(request: VendRequest, name: string): string | undefined {
  if (request.rawQueryString.length > 2048) throw new BadRequestError('INVALID_FORMAT', 'query', 'too long');
  const values = new URLSearchParams(request.rawQueryString).getAll(name);
  if (values.length > 1) throw new BadRequestError('INVALID_FORMAT', name, 'given more than once');
  return values[0];
}

/** Never echoes the path or the method: a caller could have put anything there, even a token. */
export const routeNotFound = (): ResourceNotFoundError => new ResourceNotFoundError('no such route');
