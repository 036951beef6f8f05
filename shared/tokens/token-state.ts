import { tokenId } from '../vendor-client/token-id.js';

/**
 * What the tokens table holds per credential set. Times are epoch milliseconds, except `exp` and `issuedAt`,
 * which keep the vendor's Unix seconds (the JWT claims), as in LoginResult.
 */
export interface StoredToken {
  /** First 16 hex of sha256(accessToken): what logs, keys and reports use instead of the token. */
  tokenId: string;
  accessToken: string;
  /** Unix seconds. */
  exp: number;
  /** Unix seconds (the JWT's `iat`), when the vendor sent it. */
  issuedAt?: number;
  env: string;
  /** When the broker received it. */
  obtainedAt: number;
  /**
   * After this (epoch ms, our clock), the token is no longer handed out: `exp` minus the token's hard floor,
   * on the vendor's clock (the skew below subtracted). At this instant it still is (the floor is left).
   */
  usableUntil: number;
  /**
   * The vendor's clock minus ours at login, seconds, from the response `Date` header: the most it can be (to the
   * ms; written as whole seconds by earlier releases), so that the token's life is never overstated (absent: not
   * measured, taken as 0). Every validity decision on this token adds it to our clock.
   */
  vendorClockSkewSeconds?: number;
  /**
   * The vendor's clock minus the ledger's (DynamoDB's) at login, ms, an interval certain to hold it: the `Date`
   * header's bounds widened by what the refresher knew of its clock against DynamoDB's (vendor-offset.ts). For the
   * rate ledger only, which reads `X-RateLimit-Reset` through it; no validity decision uses it. Absent: written by
   * an earlier release, or nothing measured (no `Date`); read it through vendorOffsetOf, which has the fallbacks.
   */
  vendorOffsetMs?: { lo: number; hi: number };
  /** `exp` minus `iat` (or minus the vendor's time at login when the token has no `iat`), seconds. */
  lifetimeSeconds?: number;
  tenant: string;
  companyKey: string;
  executionPlatformKey: string;
  userKey: string;
  username: string;
  roles: string[];
  groups: number[];
  defaultCompanyInventorySource: string;
}

/** A token as a read sees it: `usable` is false once less than the hard floor is left (kept for health). */
export interface TokenView extends StoredToken {
  usable: boolean;
}

export type FailureKind =
  /** 5xx, 429, timeout, network, secret unreadable: the vendor or AWS, not the credentials. Backoff. */
  | 'TRANSIENT'
  /** INVALID_CREDENTIALS, env mismatch, other 4xx: only a new secret version or the cooldown allows a retry. */
  | 'REJECTED';

export interface FailureState {
  /** The vendor's errorCode, or the broker's own (ENV_MISMATCH, VENDOR_TIMEOUT, CREDENTIALS_UNAVAILABLE …). */
  errorCode: string;
  /** The vendor's requestId, to quote to its support. */
  requestId?: string;
  kind: FailureKind;
  at: number;
  consecutive: number;
  /** No attempt before this (backoff or cooldown), unless a REJECTED failure's secret version changed. */
  cooldownUntil: number;
  /** The secret version the failed attempt used, when it was read. */
  secretVersion?: string;
  /** INVALID_CREDENTIALS only: how many times in a row this secret version was rejected (the cooldown step). */
  rejectionsOfVersion?: number;
}

export interface Lease {
  /** The process that holds it (a Lambda container, a local process). */
  holder: string;
  /** Unique per take: promote and release are conditional on it. */
  leaseId: string;
  expiresAt: number;
}

export interface CredentialSetState {
  credentialSetId: string;
  /** Absent when there is none or it is past `exp` (on the vendor's clock). */
  current?: TokenView;
  /**
   * The id of a current token left out because it is past `exp`: a re-login must still expect it (the item
   * holds it until replaced), or its conditional take would fail.
   */
  expiredCurrentTokenId?: string;
  /** The token `current` replaced, until its own `exp`: consumers may still hold it. */
  previous?: TokenView;
  /** Absent when nobody holds it or it expired. */
  lease?: Lease;
  lastAttemptAt?: number;
  failure?: FailureState;
  /** Grows with every write: a cheap "has anything changed" for caches. */
  version: number;
}

/** The token id of the vendor client (first 16 hex of sha256): one definition for logs, keys and reports. */
export const tokenIdOf = tokenId;

/** The vendor's clock (epoch ms) at our `nowMs`, as measured when the token was obtained. */
export const vendorNowMs = (
  token: Pick<StoredToken, 'vendorClockSkewSeconds'> | undefined,
  nowMs: number,
): number => nowMs + (token?.vendorClockSkewSeconds ?? 0) * 1000;

/** Whole seconds the token has left before `exp` on the vendor's clock (0 when none). */
export function validitySeconds(
  token: Pick<StoredToken, 'exp' | 'vendorClockSkewSeconds'> | undefined,
  nowMs: number,
): number {
  return token ? Math.max(0, Math.floor(token.exp - vendorNowMs(token, nowMs) / 1000)) : 0;
}

/** False from `exp` on, on the vendor's clock: the vendor answers TOKEN_EXPIRED from then. */
export const notExpired = (
  token: Pick<StoredToken, 'exp' | 'vendorClockSkewSeconds'>,
  nowMs: number,
): boolean => token.exp * 1000 > vendorNowMs(token, nowMs);

/** The token's own lifetime in seconds: stored at login; for items written before, from what they hold. */
export function tokenLifetimeSeconds(
  token: Pick<StoredToken, 'exp' | 'issuedAt' | 'obtainedAt' | 'lifetimeSeconds' | 'vendorClockSkewSeconds'>,
): number {
  if (token.lifetimeSeconds !== undefined) return token.lifetimeSeconds;
  const start = token.issuedAt ?? vendorNowMs(token, token.obtainedAt) / 1000;
  return Math.max(1, Math.round(token.exp - start));
}

/** Strips the read-time `usable` flag: it is derived, never stored. */
export function storedTokenOf(token: StoredToken | TokenView): StoredToken {
  const { usable: _usable, ...stored } = token as TokenView;
  return stored;
}
