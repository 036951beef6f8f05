import type { CredentialSetState } from '../tokens/token-state.js';

/**
 * Why a set has no usable token, as every 503 TOKEN_UNAVAILABLE says it (`details.cause`): a stable code and a
 * short reason in words. The same code for every caller, for as long as it holds: a consumer (and `token-broker
 * token`) can tell a wrong password from a re-login in progress without reading the broker's logs.
 */
export interface UnavailableCause {
  code: string;
  reason: string;
}

/** Login failures on the vendor's side (its 5xx, timeouts, network): nothing wrong with the set itself. */
const VENDOR_DOWN = new Set([
  'SERVICE_UNAVAILABLE',
  'INTERNAL_ERROR',
  'BAD_GATEWAY',
  'GATEWAY_TIMEOUT',
  'VENDOR_TIMEOUT',
  'VENDOR_UNREACHABLE',
  'VENDOR_CALL_ABORTED',
  'UNEXPECTED_VENDOR_RESPONSE',
]);

const REASONS: Record<string, string> = {
  INVALID_CREDENTIALS: "the vendor rejected the set's username or password",
  ENV_MISMATCH: "the vendor's token is for the other environment than the set's",
  RATE_LIMIT_EXCEEDED: 'the vendor rate-limited the login',
  CREDENTIALS_UNAVAILABLE: "the set's secret could not be read",
  CREDENTIALS_MALFORMED: "the set's secret is not a username and a password",
  CLOCK_SKEW_EXCESSIVE: "the vendor's clock is further from ours than the set accepts",
  TOKEN_LIFETIME_INVALID: "the vendor's token expires implausibly soon or late",
  REFRESH_IN_PROGRESS: 'a re-login is in progress',
  NO_TOKEN_YET: 'the refresher has not logged in for this set yet',
  REFRESHER_UNAVAILABLE: 'the refresher could not be asked for a token',
  TOKEN_STORE_UNAVAILABLE: 'the token store did not answer',
};

/**
 * Codes that say only "no token" (the refresher's answers when it made no attempt of its own): the set's
 * recorded failure, when there is one, says more.
 */
const GENERIC = new Set(['NO_USABLE_TOKEN', 'TOKEN_REJECTED', 'UNKNOWN']);

/** Error codes are ours or the vendor's (upper-case words); anything else is not shown. */
const safeCode = (code: string): string => (/^[A-Z][A-Z0-9_]{0,63}$/.test(code) ? code : 'UNKNOWN');

export function describeCause(code: string): UnavailableCause {
  const safe = safeCode(code);
  const reason =
    REASONS[safe] ??
    (VENDOR_DOWN.has(safe)
      ? `the vendor is unavailable: logins fail with ${safe}`
      : `the last login failed with ${safe}`);
  return { code: safe, reason };
}

/**
 * The cause to give for a set with no usable token: the refresher's own answer when it names one, else the
 * failure recorded in the tokens table (shared by every container, so a caller whose container never asked the
 * refresher gets the same cause), else a re-login in progress, else no token yet.
 */
export function causeOf(state: CredentialSetState | undefined, answered?: string): UnavailableCause {
  if (answered !== undefined && !GENERIC.has(safeCode(answered))) return describeCause(answered);
  if (state?.failure) return describeCause(state.failure.errorCode);
  if (state?.lease) return describeCause('REFRESH_IN_PROGRESS');
  if (!state?.current) return describeCause('NO_TOKEN_YET');
  return describeCause('REFRESH_IN_PROGRESS');
}
