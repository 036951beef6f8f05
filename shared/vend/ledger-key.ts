import { createHash } from 'node:crypto';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { budgetOwnerOf } from '../config/user-budgets.js';

/**
 * The ledger item a token's permits are counted in. Scope `token`: the token's own (the vendor's documented
 * per-token quota). Scope `user`: one per vendor user, i.e. per secret (shared/config/user-budgets.ts), shared
 * by the current and previous tokens of every set that logs in with that secret, so the bound holds when the
 * vendor counts per user; the configuration refuses sets of one secret that could not share it. The item is
 * the one release N-1 kept per set, `set-<id>`, of the smallest set id among them: a set alone on its secret
 * keeps its item across the upgrade (a canary and a rollback count in one item), and only a set that shares a
 * secret with a smaller id moves to that one (docs/deploying.md). Derived from the configuration alone: the
 * vend function never reads a secret. Always a valid ledger token id (/^[A-Za-z0-9_-]{1,64}$/), and never one
 * a token id could be (those are 16 hex characters, no dash).
 */
export function ledgerKeyFor(
  set: Pick<CredentialSetConfig, 'id' | 'quotaScope' | 'secretId'>,
  tokenId: string,
): string {
  if (set.quotaScope !== 'user') return tokenId;
  const owner = budgetOwnerOf(set.secretId) ?? set.id;
  const key = `set-${owner}`;
  return key.length <= 64 ? key : `set-${createHash('sha256').update(owner).digest('hex').slice(0, 40)}`;
}
