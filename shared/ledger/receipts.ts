import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Grant receipts and write ids.
 *
 * A grant answers a receipt: the ledger key, the class, the count, the grant time, the caller and the id of
 * the grant, signed with HMAC-SHA256 under a random secret that only the ledger item holds (attribute `k`,
 * created with the item, readable only by the vend function: the table is the trust boundary). A give-back
 * presents the receipt; the signature proves the ledger issued it exactly so (count, slot, class cannot be
 * changed), the claims prove whose it is, and the id proves it has not been used: the item keeps the ids of
 * the grants that may still be given back (`g`, a small string set), and a give-back removes its id in the
 * same conditional write that takes the permits back. So a receipt returns at most what its grant gave, once,
 * and only to the caller it was issued to.
 *
 * The same string set holds the write id of every write (grant, give-back, feedback), so that after a lost
 * answer (the SDK re-sends a write that was applied, and the re-send fails its condition) the ledger can tell
 * its own applied write from someone else's by reading the item. Every id carries its own end of life, so
 * the set prunes itself; it is also capped (MAX_HELD_IDS) so that the item stays within one write unit.
 */

/** A full write keeps at most this many ids in the item's set; the oldest go first (a receipt evicted early
 * returns nothing). */
export const MAX_HELD_IDS = 8;
/**
 * Concurrent grants add their ids without rewriting the item (fast-grant.ts) while the set holds fewer than
 * this; the next full write prunes it back to MAX_HELD_IDS. The item's size bound counts this many.
 */
export const HELD_IDS_LIMIT = 12;
/**
 * What a permit's validity leaves for a give-back to arrive: a late timer and the trip to the broker. Receipts
 * and write ids live no longer than they must, because the item's id set is small: at the vendor's 50 a minute
 * and 3 s permits, about 6 ids are alive at a time.
 */
export const GIVE_BACK_SLACK_MS = 1000;

const EXPIRY_DIGITS = 7;
const ID = /^[0-9a-z]{7}[A-Za-z0-9_-]{5}$/;
/** Characters of an id: 7 of expiry, 5 random (30 bits). */
export const ID_LENGTH = 12;

/**
 * A fresh id: its end of life (seconds, base 36, fixed width so that ids sort by it) and 30 random bits, which
 * is plenty: ids need to be unique only among the few alive in one item.
 */
export function newId(expiresAtMs: number): string {
  const expiry = Math.ceil(expiresAtMs / 1000)
    .toString(36)
    .padStart(EXPIRY_DIGITS, '0');
  return `${expiry}${randomBytes(4).toString('base64url').slice(0, 5)}`;
}

export const isId = (id: string): boolean => ID.test(id);

/** Epoch ms after which the id no longer matters. */
export const idExpiry = (id: string): number => Number.parseInt(id.slice(0, EXPIRY_DIGITS), 36) * 1000;

/** The ids still alive at `now`: those in `keep` (the write's own), then the newest others, MAX_HELD_IDS in all. */
export function pruneIds(
  ids: Iterable<string>,
  now: number,
  keep: ReadonlySet<string> = new Set(),
): Set<string> {
  const alive = [...ids].filter((id) => !keep.has(id) && idExpiry(id) > now).sort();
  return new Set([...keep, ...alive.slice(Math.max(0, alive.length - (MAX_HELD_IDS - keep.size)))]);
}

/** A new receipt secret for a new ledger item: 128 random bits. */
export const newSecret = (): string => randomBytes(16).toString('base64url');

/** Who a receipt belongs to, in the receipt: a short hash of the caller's identity, never the identity. */
export const callerTag = (caller: string): string =>
  createHash('sha256').update(caller).digest('base64url').slice(0, 12);

export interface ReceiptClaims {
  /** The ledger item (token id, or the set's key when the quota is counted per user). */
  key: string;
  cls: string | undefined;
  count: number;
  grantedAt: number;
  /** callerTag of the caller the grant was made for. */
  caller: string;
  /** The grant's id in the item's set. */
  id: string;
}

const VERSION = 'r1';

const sign = (secret: string, payload: string): string =>
  createHmac('sha256', Buffer.from(secret, 'base64url')).update(payload).digest('base64url').slice(0, 22);

export function issueReceipt(secret: string, claims: ReceiptClaims): string {
  const payload = [
    VERSION,
    claims.key,
    claims.cls ?? '',
    claims.count.toString(36),
    claims.grantedAt.toString(36),
    claims.caller,
    claims.id,
  ].join('.');
  return `${payload}.${sign(secret, payload)}`;
}

/** The claims of a receipt as written, before its signature is checked; undefined when it is not one. */
export function parseReceipt(
  text: string,
): { claims: ReceiptClaims; payload: string; mac: string } | undefined {
  const parts = text.split('.');
  if (parts.length !== 8 || parts[0] !== VERSION) return undefined;
  const [, key, cls, count, grantedAt, caller, id, mac] = parts as [string, ...string[]] as string[];
  if (!key || cls === undefined || !count || !grantedAt || !caller || !id || !mac || !isId(id))
    return undefined;
  const claims: ReceiptClaims = {
    key,
    cls: cls === '' ? undefined : cls,
    count: Number.parseInt(count, 36),
    grantedAt: Number.parseInt(grantedAt, 36),
    caller,
    id,
  };
  if (!Number.isSafeInteger(claims.count) || claims.count < 1) return undefined;
  if (!Number.isSafeInteger(claims.grantedAt) || claims.grantedAt < 0) return undefined;
  return { claims, payload: parts.slice(0, 7).join('.'), mac };
}

/** Whether the receipt's signature is the ledger's under `secret` (constant time). */
export function signatureHolds(secret: string, payload: string, mac: string): boolean {
  const expected = Buffer.from(sign(secret, payload));
  const given = Buffer.from(mac);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/**
 * How long a grant of this plan can be given back (and how long a write id is kept): twice the permit
 * validity, plus GIVE_BACK_SLACK_MS. Unused permits are given back when they lapse, within their validity; a
 * write id is checked right after its write's retries, well within a second or two.
 */
export const receiptTtlMs = (plan: { validityMs: number }): number =>
  2 * plan.validityMs + GIVE_BACK_SLACK_MS;
