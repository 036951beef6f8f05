import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { LoginResult } from '../vendor/types.js';
import { TokenEnvMismatchError, TokenLifetimeError } from './errors.js';
import { type StoredToken, tokenIdOf } from './token-state.js';

export interface CheckedToken {
  token: StoredToken;
  /** The vendor's clock minus ours, from the response Date header (whole seconds; 1 s resolution). */
  vendorClockSkewSeconds?: number;
  /** False when the token had no env claim to check (the vendor says it "may" have one): logged as a warning. */
  envClaimed: boolean;
}

/**
 * Checks a fresh login before it may become current: the token's env claim names the set's environment, and
 * its expiry is beyond the hard floor yet not absurdly far. A vendor clock running ahead of ours shortens the
 * usable span by the skew (the vendor will call the token expired that much earlier by our clock).
 * Throws TokenEnvMismatchError / TokenLifetimeError; the token is then discarded, never stored.
 */
export function checkLoginResult(result: LoginResult, set: CredentialSetConfig, now: number): CheckedToken {
  const tokenId = tokenIdOf(result.accessToken);
  if (result.env !== undefined && result.env !== set.environment) {
    throw new TokenEnvMismatchError(
      `set ${set.id} declares environment ${set.environment} but token ${tokenId} is for ${result.env}`,
    );
  }
  const nowSeconds = now / 1000;
  const { hardFloorSeconds, maxTokenLifetimeSeconds } = set.refresh;
  if (result.exp - nowSeconds <= hardFloorSeconds) {
    throw new TokenLifetimeError(
      `set ${set.id}: token ${tokenId} expires within the hard floor (exp ${result.exp})`,
    );
  }
  if (result.exp - nowSeconds > maxTokenLifetimeSeconds) {
    throw new TokenLifetimeError(
      `set ${set.id}: token ${tokenId} claims an absurd lifetime (exp ${result.exp})`,
    );
  }
  const skew = result.vendorDate === undefined ? undefined : Math.round((result.vendorDate - now) / 1000);
  const token: StoredToken = {
    tokenId,
    accessToken: result.accessToken,
    exp: result.exp,
    // Without a claim the set's own environment is recorded; `envClaimed` says it was not verified.
    env: result.env ?? set.environment,
    obtainedAt: now,
    usableUntil: (result.exp - hardFloorSeconds - Math.max(0, skew ?? 0)) * 1000,
    tenant: result.tenant,
    companyKey: result.companyKey,
    executionPlatformKey: result.executionPlatformKey,
    userKey: result.userDetails.userKey,
    username: result.userDetails.username,
    roles: result.roles,
    groups: result.userDetails.groups,
    defaultCompanyInventorySource: result.defaultCompanyInventorySource,
  };
  if (result.issuedAt !== undefined) token.issuedAt = result.issuedAt;
  const checked: CheckedToken = { token, envClaimed: result.env !== undefined };
  if (skew !== undefined) checked.vendorClockSkewSeconds = skew;
  return checked;
}
