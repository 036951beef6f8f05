import { createHash } from 'node:crypto';

/** What logs and keys show instead of a token: sha256 of it, hex, first 16 characters. */
export function tokenId(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex').slice(0, 16);
}
