import { createHash } from 'node:crypto';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { secretIdentity } from '../config/user-budgets.js';

/** One key per secret, computed once: a hash per permit request would be cheap, but it is the same each time. */
const userKeys = new Map<string, string>();

/**
 * The ledger item a token's permits are counted in. Scope `token`: the token's own (the vendor's documented
 * per-token quota). Scope `user`: one per vendor user, i.e. per secret (shared/config/user-budgets.ts), shared
 * by the current and previous tokens of every set that logs in with that secret, so the bound holds when the
 * vendor counts per user; the configuration refuses sets of one secret that could not share it. Derived from
 * the configuration alone: the vend function never reads a secret. Always a valid ledger token id
 * (/^[A-Za-z0-9_-]{1,64}$/), and never one a token id (16 hex characters, no dash) or release N-1's per-set key
 * (`set-…`) could be.
 */
export function ledgerKeyFor(
  set: Pick<CredentialSetConfig, 'quotaScope' | 'secretId'>,
  tokenId: string,
): string {
  if (set.quotaScope !== 'user') return tokenId;
  const identity = secretIdentity(set.secretId);
  let key = userKeys.get(identity);
  if (key === undefined) {
    key = `user-${createHash('sha256').update(identity).digest('hex').slice(0, 40)}`;
    userKeys.set(identity, key);
  }
  return key;
}
