import { createHash } from 'node:crypto';
import type { CredentialSetConfig } from '../config/credential-sets.js';

/**
 * The ledger item a token's permits are counted in. Scope `token`: the token's own (the vendor's documented
 * per-token quota). Scope `user`: one per set, shared by its current and previous tokens, so the bound holds
 * when the vendor counts per user. Always a valid ledger token id (/^[A-Za-z0-9_-]{1,64}$/), and never one
 * a token id could be (those are 16 hex characters, no dash).
 */
export function ledgerKeyFor(set: Pick<CredentialSetConfig, 'id' | 'quotaScope'>, tokenId: string): string {
  if (set.quotaScope !== 'user') return tokenId;
  const key = `set-${set.id}`;
  return key.length <= 64 ? key : `set-${createHash('sha256').update(set.id).digest('hex').slice(0, 40)}`;
}
