import { parseRateLimitHeaders } from '../shared/vendor-client/parse-response.js';
import type { RateLimitHeaders } from '../shared/vendor-client/types.js';
import { InvalidClientRequestError } from './errors.js';
import type { VendorAnswer } from './types.js';

/**
 * A vendor answer a service got itself, read the way the client reads its own (X-RateLimit-*, Retry-After as
 * seconds or an HTTP-date against the vendor's `Date`). Anything that is not an answer is refused by name.
 */
export function readVendorAnswer(
  answer: VendorAnswer,
  nowMs: number,
): { status: number; rateLimit: RateLimitHeaders } {
  const status = (answer as Partial<VendorAnswer> | undefined)?.status;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) {
    throw new InvalidClientRequestError('answer.status: must be an HTTP status (a whole number 100-599)');
  }
  const raw = answer.headers;
  let headers: Headers;
  if (raw instanceof Headers) headers = raw;
  else if (typeof raw === 'object' && raw !== null) {
    headers = new Headers();
    for (const [name, value] of Object.entries(raw)) {
      if (value === undefined) continue;
      try {
        for (const one of typeof value === 'string' ? [value] : value) headers.append(name, String(one));
      } catch {
        // Named, never quoted: a header's value is the service's.
        throw new InvalidClientRequestError(`answer.headers: '${name.slice(0, 64)}' is not a valid header`);
      }
    }
  } else
    throw new InvalidClientRequestError('answer.headers: must be a Headers object or a record of headers');
  return { status, rateLimit: parseRateLimitHeaders(headers, nowMs) };
}
