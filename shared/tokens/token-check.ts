import { dateHeaderOffset } from '../clock.js';
import { type CredentialSetConfig, expectedEnvClaimsOf } from '../config/credential-sets.js';
import type { LoginResult } from '../vendor-client/types.js';
import { ClockSkewError, TokenEnvMismatchError, TokenLifetimeError } from './errors.js';
import { hardFloorSeconds } from './thresholds.js';
import { type StoredToken, tokenIdOf } from './token-state.js';
import { vendorOffsetAtLogin } from './vendor-offset.js';

export interface CheckedToken {
  token: StoredToken;
  /**
   * The vendor's clock minus ours, from the response Date header: the most it can be (ms precision), so that a
   * token's remaining life, which every later decision reads through it, is never overstated.
   */
  vendorClockSkewSeconds?: number;
  /** False when the token had no env claim to check (the vendor says it "may" have one): logged as a warning. */
  envClaimed: boolean;
}

/**
 * The vendor's clock minus ours (ms), as far as its Date header tells: the vendor stamped it, in that whole
 * second, between our sending the request and `now` (after the answer). Undefined without a Date.
 */
export function vendorSkewBounds(
  result: Pick<LoginResult, 'vendorDate' | 'requestSentAt'>,
  now: number,
): { least: number; most: number } | undefined {
  if (result.vendorDate === undefined) return undefined;
  const { lo, hi } = dateHeaderOffset(result.vendorDate, Math.min(result.requestSentAt ?? now, now), now);
  return { least: lo, most: hi };
}

/**
 * Checks a fresh login before it may become current: the token's env claim is one the set expects (compared
 * case-insensitively), the vendor's clock is within the accepted skew of ours, and the expiry is beyond the
 * token's hard floor yet not absurdly far, all on the vendor's clock. The measured skew is kept with the
 * token: every later validity decision adds it to our clock, whichever way the clocks differ. So is the
 * vendor's clock against the ledger's (`vendorOffsetMs`), from the same `Date` and `dynamoOffsetMs`, DynamoDB's
 * clock minus ours as far as known (vendor-offset.ts, vendorOffsetAtLogin); it decides nothing here.
 * Throws TokenEnvMismatchError / ClockSkewError / TokenLifetimeError; the token is then discarded, never stored.
 */
export function checkLoginResult(
  result: LoginResult,
  set: CredentialSetConfig,
  now: number,
  dynamoOffsetMs?: { lo: number; hi: number },
): CheckedToken {
  const tokenId = tokenIdOf(result.accessToken);
  if (result.env !== undefined && !expectedEnvClaimsOf(set).includes(result.env.trim().toLowerCase())) {
    throw new TokenEnvMismatchError(
      `set ${set.id} declares environment ${set.environment} but token ${tokenId} is for ${result.env}`,
    );
  }
  const bounds = vendorSkewBounds(result, now);
  // Decisions take the vendor's clock as far ahead as it can be: a token then never seems to live longer than it
  // does. It is refused only when even the nearest value the Date allows is beyond the accepted skew.
  const skew = bounds && bounds.most / 1000;
  const { maxClockSkewSeconds, maxTokenLifetimeSeconds } = set.refresh;
  if (bounds && (bounds.least / 1000 > maxClockSkewSeconds || bounds.most / 1000 < -maxClockSkewSeconds)) {
    const nearest = bounds.least > 0 ? bounds.least : bounds.most;
    throw new ClockSkewError(
      `set ${set.id}: the vendor's clock is ${Math.round(nearest / 1000)} s from ours (at most ${maxClockSkewSeconds} s accepted); token ${tokenId} discarded`,
    );
  }
  const vendorNowSeconds = now / 1000 + (skew ?? 0);
  const lifetimeSeconds = Math.max(1, Math.round(result.exp - (result.issuedAt ?? vendorNowSeconds)));
  const floor = hardFloorSeconds(set, lifetimeSeconds);
  if (result.exp - vendorNowSeconds <= floor) {
    throw new TokenLifetimeError(
      `set ${set.id}: token ${tokenId} expires within the hard floor (exp ${result.exp})`,
    );
  }
  if (result.exp - vendorNowSeconds > maxTokenLifetimeSeconds) {
    throw new TokenLifetimeError(
      `set ${set.id}: token ${tokenId} claims an absurd lifetime (exp ${result.exp})`,
    );
  }
  const token: StoredToken = {
    tokenId,
    accessToken: result.accessToken,
    exp: result.exp,
    // Without a claim the set's own environment is recorded; `envClaimed` says it was not verified.
    env: result.env ?? set.environment,
    obtainedAt: now,
    usableUntil: (result.exp - floor) * 1000 - (bounds?.most ?? 0),
    lifetimeSeconds,
    tenant: result.tenant,
    companyKey: result.companyKey,
    executionPlatformKey: result.executionPlatformKey,
    userKey: result.userDetails.userKey,
    username: result.userDetails.username,
    roles: result.roles,
    groups: result.userDetails.groups,
    defaultCompanyInventorySource: result.defaultCompanyInventorySource,
  };
  if (skew !== undefined) token.vendorClockSkewSeconds = skew;
  if (bounds) token.vendorOffsetMs = vendorOffsetAtLogin(bounds, dynamoOffsetMs);
  if (result.issuedAt !== undefined) token.issuedAt = result.issuedAt;
  const checked: CheckedToken = { token, envClaimed: result.env !== undefined };
  if (skew !== undefined) checked.vendorClockSkewSeconds = skew;
  return checked;
}
