import type { CredentialSetState, FailureState, StoredToken } from './token-state.js';

/**
 * The tokens table as the refresher and the vend function see it. Every write is conditional: a lease is
 * taken in one write and everything the holder writes afterwards is conditional on still holding it.
 * Times are epoch milliseconds. A write whose answer was lost (applied, the SDK's re-sent copy refused) is
 * answered as applied: only another writer's lease or release is contention or a lost lease.
 */
export interface TokenStore {
  /** A consistent read; expired tokens and leases are left out, tokens past their floor are `usable: false`. */
  read(credentialSetId: string, now: number): Promise<CredentialSetState | undefined>;
  /**
   * Only the item's version (a consistent read of one attribute; undefined: no item): what a warm cache
   * checks to learn cheaply whether anything changed since its last read.
   */
  readVersion(credentialSetId: string): Promise<number | undefined>;
  /** One conditional write; on success, the state right after it (the "read again" comes with the write). */
  takeLease(request: TakeLeaseRequest): Promise<TakeLeaseResult>;
  /** Makes `token` current, keeps `previous`, clears the failure and the lease. False when the lease was lost. */
  promote(request: PromoteRequest): Promise<boolean>;
  /** Records a failed attempt beside the tokens (never instead of them) and frees the lease. False when lost. */
  recordFailure(request: RecordFailureRequest): Promise<boolean>;
}

export interface TakeLeaseRequest {
  credentialSetId: string;
  holder: string;
  leaseId: string;
  now: number;
  leaseExpiresAt: number;
  /** The storm guard: the take fails when anyone attempted a login after this time. */
  lastAttemptNoLaterThan: number;
  /** The current token the caller decided on (null: none). The take fails if another replaced it meanwhile. */
  expectedTokenId: string | null;
  /** With `expectedTokenId` null: a current token the read left out as expired, which may be replaced. */
  expiredTokenId?: string;
  /** The secret version just read: a REJECTED failure with another version no longer blocks (cooldown waived). */
  secretVersion?: string;
}

export type TakeLeaseResult = { taken: true; state: CredentialSetState } | { taken: false };

export interface PromoteRequest {
  credentialSetId: string;
  leaseId: string;
  now: number;
  token: StoredToken;
  /** The token being replaced, while it has not expired. */
  previous?: StoredToken;
}

export interface RecordFailureRequest {
  credentialSetId: string;
  leaseId: string;
  now: number;
  failure: FailureState;
}
