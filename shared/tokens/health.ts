import { type SetTiming, tokenThresholds } from './thresholds.js';
import { type CredentialSetState, validitySeconds } from './token-state.js';

export type HealthState =
  /** A usable token with more than the soft threshold left, no failure. */
  | 'HEALTHY'
  /** A usable token, due for re-login or being re-logged in right now. */
  | 'REFRESHING'
  /** A usable token, but the last attempt failed (vendor down, or credentials rejected while the old token lasts). */
  | 'DEGRADED'
  /** No token past the hard floor: consumers get 503. */
  | 'NO_USABLE_TOKEN'
  /** No usable token and the vendor rejected the credentials: the secret needs fixing. */
  | 'CREDENTIALS_REJECTED'
  /** No usable token and the vendor's token named the other environment: the configuration needs fixing. */
  | 'ENV_MISMATCH';

export interface SetHealth {
  state: HealthState;
  tokenId?: string;
  /** The current token's `exp`, Unix seconds. */
  expiresAt?: number;
  validitySeconds: number;
  /** `at` is epoch ms. */
  lastError?: { code: string; at: number; requestId?: string };
  consecutiveFailures: number;
  /** Epoch ms before which no new attempt will be made (backoff or cooldown), when one is pending. */
  nextAttemptAt?: number;
  /** How many times in a row the vendor rejected the current secret version (the cooldown's step). */
  rejectionsOfSecretVersion?: number;
}

/** What the vend API and the logs say about a set. No token in it. */
export function health(state: CredentialSetState | undefined, now: number, set: SetTiming): SetHealth {
  const current = state?.current;
  const failure = state?.failure;
  const result: SetHealth = {
    state: 'HEALTHY',
    validitySeconds: validitySeconds(current, now),
    consecutiveFailures: failure?.consecutive ?? 0,
  };
  if (current) {
    result.tokenId = current.tokenId;
    result.expiresAt = current.exp;
  }
  if (failure) {
    result.lastError = { code: failure.errorCode, at: failure.at };
    if (failure.requestId) result.lastError.requestId = failure.requestId;
    if (failure.cooldownUntil > now) result.nextAttemptAt = failure.cooldownUntil;
    if (failure.rejectionsOfVersion !== undefined)
      result.rejectionsOfSecretVersion = failure.rejectionsOfVersion;
  }
  if (!current?.usable) {
    if (failure?.errorCode === 'INVALID_CREDENTIALS') result.state = 'CREDENTIALS_REJECTED';
    else if (failure?.errorCode === 'ENV_MISMATCH') result.state = 'ENV_MISMATCH';
    else result.state = 'NO_USABLE_TOKEN';
  } else if (failure) {
    result.state = 'DEGRADED';
  } else if (state?.lease || result.validitySeconds <= tokenThresholds(set, current).softSeconds) {
    result.state = 'REFRESHING';
  }
  return result;
}
