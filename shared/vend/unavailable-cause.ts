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

/** The causes with words of their own; any other code reads "the last login failed with <CODE>". */
const REASONS: Record<string, string> = {
  INVALID_CREDENTIALS: "the vendor rejected the set's username or password",
  ENV_MISMATCH: "the vendor's token is for the other environment",
  CREDENTIALS_UNAVAILABLE: "the set's secret could not be read",
  CREDENTIALS_MALFORMED: "the set's secret is not a username and a password",
  REFRESH_IN_PROGRESS: 'a re-login is in progress',
  NO_TOKEN_YET: 'no login yet for this set',
  REFRESHER_UNAVAILABLE: 'the refresher could not be asked',
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
  return { code: safe, reason: REASONS[safe] ?? `the last login failed with ${safe}` };
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
