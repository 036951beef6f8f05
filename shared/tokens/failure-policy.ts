import type { RefreshSettings } from '../config/credential-sets.js';
import { CredentialsUnavailableError } from '../credentials/credentials-source.js';
import { BrokerError } from '../errors.js';
import {
  VendorApiError,
  VendorCallAbortedError,
  VendorError,
  VendorRateLimitError,
} from '../vendor-client/errors.js';
import { backoffSeconds, credentialsCooldownSeconds } from './thresholds.js';
import type { FailureKind, FailureState } from './token-state.js';

/**
 * What a failed attempt means for the next one. The vendor's retryable failures (5xx, 429, timeouts, network)
 * and an unreadable secret say nothing about the credentials: back off briefly, keep the current token.
 * Everything else (INVALID_CREDENTIALS, env mismatch, an unusable token, other 4xx, a malformed secret) will
 * fail the same way until someone changes the secret: cool down, and try at once on a new secret version.
 */
export function failureKind(error: unknown): FailureKind {
  // Our own deadline (the lease, the Lambda timeout) aborted the call: the vendor was slow, not the credentials.
  if (error instanceof VendorCallAbortedError) return 'TRANSIENT';
  if (error instanceof VendorError) return error.retryable ? 'TRANSIENT' : 'REJECTED';
  if (error instanceof CredentialsUnavailableError) return 'TRANSIENT';
  // Unknown errors (bugs) back off briefly rather than lock a set out for a cooldown.
  return error instanceof BrokerError ? 'REJECTED' : 'TRANSIENT';
}

export const errorCodeOf = (error: unknown): string =>
  error instanceof BrokerError ? error.code : 'REFRESH_FAILED';

export function failureFor(
  error: unknown,
  context: { now: number; previous?: FailureState; secretVersion?: string; refresh: RefreshSettings },
): FailureState {
  const kind = failureKind(error);
  const errorCode = errorCodeOf(error);
  const { previous } = context;
  const consecutive = (previous?.consecutive ?? 0) + 1;
  // Only the same secret version rejected again escalates: that is the lockout risk at the vendor. Any
  // other rejection (env mismatch, an implausible token) is fixed by configuration, and must not wait a day.
  const rejectionsOfVersion =
    errorCode !== 'INVALID_CREDENTIALS'
      ? undefined
      : previous?.errorCode === 'INVALID_CREDENTIALS' &&
          previous.secretVersion !== undefined &&
          previous.secretVersion === context.secretVersion
        ? (previous.rejectionsOfVersion ?? 1) + 1
        : 1;
  let waitSeconds =
    kind === 'REJECTED'
      ? credentialsCooldownSeconds(rejectionsOfVersion ?? 1, context.refresh)
      : backoffSeconds(consecutive, context.refresh);
  // The vendor's Retry-After on a 429 is a rule, not a hint.
  if (error instanceof VendorRateLimitError && error.retryAfterSeconds !== undefined) {
    waitSeconds = Math.max(waitSeconds, error.retryAfterSeconds);
  }
  const failure: FailureState = {
    errorCode,
    kind,
    at: context.now,
    consecutive,
    cooldownUntil: context.now + waitSeconds * 1000,
  };
  if (error instanceof VendorApiError && error.requestId) failure.requestId = error.requestId;
  if (context.secretVersion !== undefined) failure.secretVersion = context.secretVersion;
  if (rejectionsOfVersion !== undefined) failure.rejectionsOfVersion = rejectionsOfVersion;
  return failure;
}
