import { createHash } from 'node:crypto';
import type { RefreshSettings } from '../config/credential-sets.js';
import { type StoredToken, tokenLifetimeSeconds, validitySeconds } from './token-state.js';

export interface SetTiming {
  id: string;
  refresh: RefreshSettings;
}

/** A number in [0, 1) from a hash of the set id: every process agrees on it, and sets differ. */
function setFraction(setId: string): number {
  return createHash('sha256').update(setId).digest().readUInt32BE(0) / 2 ** 32;
}

/**
 * The set's soft threshold in whole seconds for a token of `lifetimeSeconds` (none given: the configured
 * one): the smaller of the configured threshold plus a jitter derived from the set id, and the configured
 * fraction of the lifetime less a jitter of its own. Long tokens keep the configured hour (and so the outage
 * tolerance); short ones are re-logged in once, with a fifth of their life left, not at every run.
 */
export function softThresholdSeconds(set: SetTiming, lifetimeSeconds?: number): number {
  const { refresh } = set;
  const fraction = setFraction(set.id);
  const configured = refresh.softThresholdSeconds + Math.floor(fraction * refresh.softThresholdJitterSeconds);
  if (lifetimeSeconds === undefined) return configured;
  const share =
    refresh.softThresholdLifetimeFraction - fraction * refresh.softThresholdLifetimeJitterFraction;
  return Math.min(configured, Math.floor(share * lifetimeSeconds));
}

/**
 * The hard floor for a token of `lifetimeSeconds` (none given: the configured one): the vendor's 5 minutes,
 * but never more than the configured fraction of the lifetime (a 10-minute token would otherwise be
 * unusable half its life). Always below the soft threshold of the same token (the schema checks fractions).
 */
export function hardFloorSeconds(set: SetTiming, lifetimeSeconds?: number): number {
  const { refresh } = set;
  if (lifetimeSeconds === undefined) return refresh.hardFloorSeconds;
  return Math.min(
    refresh.hardFloorSeconds,
    Math.max(1, Math.floor(refresh.hardFloorLifetimeFraction * lifetimeSeconds)),
  );
}

/** Both thresholds of one stored token, from its own lifetime. */
export function tokenThresholds(
  set: SetTiming,
  token: Pick<StoredToken, 'exp' | 'issuedAt' | 'obtainedAt' | 'lifetimeSeconds' | 'vendorClockSkewSeconds'>,
): { lifetimeSeconds: number; softSeconds: number; hardFloorSeconds: number } {
  const lifetime = tokenLifetimeSeconds(token);
  return {
    lifetimeSeconds: lifetime,
    softSeconds: softThresholdSeconds(set, lifetime),
    hardFloorSeconds: hardFloorSeconds(set, lifetime),
  };
}

/**
 * A scheduled run re-logs in when the token is missing or has no more than its soft threshold left, on the
 * vendor's clock.
 */
export function refreshDue(
  token:
    | Pick<StoredToken, 'exp' | 'issuedAt' | 'obtainedAt' | 'lifetimeSeconds' | 'vendorClockSkewSeconds'>
    | undefined,
  now: number,
  set: SetTiming,
): boolean {
  return !token || validitySeconds(token, now) <= tokenThresholds(set, token).softSeconds;
}

/** After a vendor failure: base·2^(n-1) seconds, capped (below the schedule period by default). */
export function backoffSeconds(consecutive: number, refresh: RefreshSettings): number {
  const exponent = Math.min(Math.max(consecutive - 1, 0), 30);
  return Math.min(refresh.retryBackoffMaxSeconds, refresh.retryBackoffBaseSeconds * 2 ** exponent);
}

/**
 * The cooldown after the `rejections`-th rejection in a row of one secret version: the configured one, grown
 * by the factor each time, capped (15 min, 1 h, 4 h, 16 h, then daily by default).
 */
export function credentialsCooldownSeconds(rejections: number, refresh: RefreshSettings): number {
  const exponent = Math.min(Math.max(rejections - 1, 0), 30);
  return Math.min(
    refresh.credentialsCooldownMaxSeconds,
    refresh.credentialsCooldownSeconds * refresh.credentialsCooldownGrowth ** exponent,
  );
}

/** Whole seconds until `until` (epoch ms), at least 1: what a caller is told to wait. */
export const secondsUntil = (until: number, now: number): number =>
  Math.max(1, Math.ceil((until - now) / 1000));
