import { createHash } from 'node:crypto';
import type { RefreshSettings } from '../config/credential-sets.js';
import { type StoredToken, validitySeconds } from './token-state.js';

export interface SetTiming {
  id: string;
  refresh: RefreshSettings;
}

/**
 * The set's soft threshold in whole seconds: the configured one plus a jitter derived from a hash of the set
 * id, so every process agrees on it and sets that logged in together re-login apart.
 */
export function softThresholdSeconds(set: SetTiming): number {
  const fraction = createHash('sha256').update(set.id).digest().readUInt32BE(0) / 2 ** 32;
  return set.refresh.softThresholdSeconds + Math.floor(fraction * set.refresh.softThresholdJitterSeconds);
}

/** A scheduled run re-logs in when the token is missing or has no more than the soft threshold left. */
export function refreshDue(
  token: Pick<StoredToken, 'exp'> | undefined,
  now: number,
  set: SetTiming,
): boolean {
  return !token || validitySeconds(token, now) <= softThresholdSeconds(set);
}

/** After a vendor failure: base·2^(n-1) seconds, capped (below the schedule period by default). */
export function backoffSeconds(consecutive: number, refresh: RefreshSettings): number {
  const exponent = Math.min(Math.max(consecutive - 1, 0), 30);
  return Math.min(refresh.retryBackoffMaxSeconds, refresh.retryBackoffBaseSeconds * 2 ** exponent);
}

/** Whole seconds until `until` (epoch ms), at least 1: what a caller is told to wait. */
export const secondsUntil = (until: number, now: number): number =>
  Math.max(1, Math.ceil((until - now) / 1000));
