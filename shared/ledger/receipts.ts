import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Grant receipts (write ids: item/write-loop.ts, item/item-size.ts).
 *
 * A grant answers a receipt: the ledger key, the class, the count, the grant time, the caller and a random id
 * (and, for a set with reservations, `r2`: a tag of the reserved consumer and how much of each reserved window
 * came from its reservation, so that a give-back returns permits to the rings they were counted in),
 * signed with HMAC-SHA256 under a random secret that only the ledger item holds (attribute `k`, created with
 * the item, readable only by the vend function: the table is the trust boundary). A give-back presents the
 * receipt: the signature proves the ledger issued it exactly so (count, slot, class cannot be changed), the
 * claims say whose it is and whether it is still young enough, and the item's short set of SPENT receipt ids
 * (`g`) says whether it was used: a give-back adds its id there in the same conditional write that takes the
 * permits back, and the id stays until the receipt could no longer be used anyway. So a receipt returns at
 * most what its grant gave, once, and only to the caller it was issued to. Grants store nothing for their
 * receipts: tracking spent receipts costs item space per give-back (a full write anyway), tracking open ones
 * would cost it per grant and take the cheap concurrent path (item/write-loop.ts grantAdditions) away from busy tokens.
 *
 * The spent set is short (it is in every write of the item), so it is shared out: each caller may hold at
 * most SPENT_PER_CALLER of its SPENT_KEPT places, told by a mark of the caller inside the receipt id. A
 * give-back that finds no place (its caller's share taken, or the set full of others') is not recorded: it
 * changes nothing and returns nothing, and its permits age out with their window, which only over-counts.
 * So no caller, nor two, can keep another's give-backs from being recorded, and nothing is ever evicted: an
 * evicted id would let a replay of its receipt be honoured again by release N-1, which knows only `g`.
 */

/** Spent receipt ids an item holds at most (the item's size bound counts this many). */
export const SPENT_LIMIT = 10;
/**
 * Spent receipt ids this release records at most: one fewer than SPENT_LIMIT, because release N-1 answers 503
 * to every give-back while the set holds SPENT_LIMIT, and a canary or a rollback runs both releases at once.
 */
export const SPENT_KEPT = SPENT_LIMIT - 1;
/**
 * Of those, one caller's at most: give-backs are made when unused permits lapse, within the 5 s a receipt
 * lives (twice the 2 s validity, plus 1 s), so a consumer process holding one lease at a time spends about one
 * receipt every 2 s: 3 alive at once. Three callers are needed to fill the set, and a third of it is always
 * left to any caller by the other two.
 */
export const SPENT_PER_CALLER = 3;
/**
 * What a permit's validity leaves for a give-back to arrive: a late timer and the trip to the broker. Spent
 * receipt ids are kept as long as the receipt can be used: at the vendor's 50 a minute and 2 s permits, a
 * give-back a second keeps about 5 at a time.
 */
export const GIVE_BACK_SLACK_MS = 1000;

const EXPIRY_DIGITS = 7;
const RECEIPT_ID = /^[0-9a-z]{7}[A-Za-z0-9_-]{4}$/;
/** Characters of a receipt id: 7 of expiry (seconds, base 36), 4 random (24 bits). */
export const RECEIPT_ID_LENGTH = 11;

export const randomChars = (n: number): string =>
  randomBytes(Math.ceil((n * 3) / 4))
    .toString('base64url')
    .slice(0, n);

/** Characters of a receipt id that mark its caller (spentMark), after the expiry. */
const MARK_LENGTH = 2;

/**
 * The mark of a caller in its receipt ids: 12 bits of its callerTag (a hash), so that the spent set can tell
 * how many places a caller holds. Two callers share a mark once in 4096 pairs: they then share one share.
 */
export const spentMark = (callerTag: string): string => callerTag.slice(0, MARK_LENGTH);
/** Whether a receipt id carries this mark (ids of release N-1, all random, carry one by chance: 1 in 4096). */
export const hasMark = (id: string, mark: string): boolean =>
  id.slice(EXPIRY_DIGITS, EXPIRY_DIGITS + MARK_LENGTH) === mark;

/**
 * A receipt id: its end of life (seconds, base 36, fixed width), then the caller's mark (spentMark of the
 * caller's tag) and 12 random bits, or without a caller 24 random bits (the shape release N-1 checks either
 * way). The random bits must tell it from the caller's other receipts of the same second that are spent at the
 * same time (at most SPENT_PER_CALLER): two alike, once in about 1400 give-backs at the worst, make the second
 * one answer "spent" and return nothing (an over-count, safe). `avoid`: ids it must not be (the spent ones).
 */
export function newReceiptId(expiresAtMs: number, callerTag?: string, avoid?: ReadonlySet<string>): string {
  const expiry = Math.ceil(expiresAtMs / 1000)
    .toString(36)
    .padStart(EXPIRY_DIGITS, '0');
  const mark = callerTag === undefined ? '' : spentMark(callerTag);
  for (;;) {
    const id = `${expiry}${mark}${randomChars(4 - mark.length)}`;
    if (!avoid?.has(id)) return id;
  }
}

export const isReceiptId = (id: string): boolean => RECEIPT_ID.test(id);

/** Epoch ms after which the receipt can no longer be given back (and its spent id no longer matters). */
export const receiptIdExpiry = (id: string): number => Number.parseInt(id.slice(0, EXPIRY_DIGITS), 36) * 1000;

/** The spent receipt ids that still matter at `now`. */
export function aliveReceiptIds(ids: Iterable<string>, now: number): Set<string> {
  return new Set([...ids].filter((id) => receiptIdExpiry(id) > now));
}

/** A new receipt secret for a new ledger item: 128 random bits. */
export const newSecret = (): string => randomBytes(16).toString('base64url');

/** Characters of a caller tag. */
export const CALLER_TAG_LENGTH = 12;
/**
 * Who a receipt belongs to, in the receipt (and who claimed a cooldown, in the item: vendor-feedback.ts): a short
 * hash of the caller's identity, never the identity.
 */
export const callerTag = (caller: string): string =>
  createHash('sha256').update(caller).digest('base64url').slice(0, CALLER_TAG_LENGTH);

export interface ReceiptClaims {
  /** The ledger item (token id, or the set's key when the quota is counted per user). */
  key: string;
  cls: string | undefined;
  count: number;
  grantedAt: number;
  /** callerTag of the caller the grant was made for. */
  caller: string;
  /** The receipt's id (newReceiptId): recorded among the item's spent ids when it is given back. */
  id: string;
  /** Grants of a plan with reservations: consumerTag of the consumer whose reservation it drew on ('' for none)... */
  consumer?: string;
  /** ...and per reserved window (general ring key), how many came from that reservation (the rest: shared). */
  split?: [generalKey: string, reserved: number][];
}

const VERSION = 'r1';
/** Receipts of grants made under reservations: r1's fields, then the consumer and the split. */
const VERSION_SPLIT = 'r2';
const WINDOW_KEY = /^\*\/([0-9a-z]+)$/;
// Receipts keep to the vend API's characters (A-Z a-z 0-9 . _ * -), '.' separating fields.
const SPLIT_PART = /^([0-9a-z]+)-([0-9a-z]+)$/;
const CONSUMER = /^([A-Za-z0-9_-]{8})?$/;

/** A reserved consumer in a receipt: a short hash of its name (names run to 63 characters; receipts to 256). */
export const consumerTag = (name: string): string =>
  createHash('sha256').update(name).digest('base64url').slice(0, 8);

const sign = (secret: string, payload: string): string =>
  createHmac('sha256', Buffer.from(secret, 'base64url')).update(payload).digest('base64url').slice(0, 22);

export function issueReceipt(secret: string, claims: ReceiptClaims): string {
  const fields = [
    claims.split ? VERSION_SPLIT : VERSION,
    claims.key,
    claims.cls ?? '',
    claims.count.toString(36),
    claims.grantedAt.toString(36),
    claims.caller,
    claims.id,
  ];
  if (claims.split)
    fields.push(
      claims.consumer ?? '',
      claims.split.map(([key, a]) => `${key.replace(WINDOW_KEY, '$1')}-${a.toString(36)}`).join('_'),
    );
  const payload = fields.join('.');
  return `${payload}.${sign(secret, payload)}`;
}

function parseSplit(text: string): [string, number][] | undefined {
  const split: [string, number][] = [];
  for (const part of text === '' ? [] : text.split('_')) {
    const match = SPLIT_PART.exec(part);
    if (!match) return undefined;
    const a = Number.parseInt(match[2] as string, 36);
    if (!Number.isSafeInteger(a)) return undefined;
    split.push([`*/${match[1]}`, a]);
  }
  return split;
}

/** The claims of a receipt as written, before its signature is checked; undefined when it is not one. */
export function parseReceipt(
  text: string,
): { claims: ReceiptClaims; payload: string; mac: string } | undefined {
  const parts = text.split('.');
  const splitFields = parts[0] === VERSION_SPLIT ? 2 : 0;
  if (parts.length !== 8 + splitFields || (parts[0] !== VERSION && splitFields === 0)) return undefined;
  const [, key, cls, count, grantedAt, caller, id] = parts as [string, ...string[]] as string[];
  const mac = parts[parts.length - 1];
  if (!key || cls === undefined || !count || !grantedAt || !caller || !id || !mac || !isReceiptId(id))
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
  if (splitFields > 0) {
    const consumer = parts[7] as string;
    const split = parseSplit(parts[8] as string);
    if (!CONSUMER.test(consumer) || !split || split.some(([, a]) => a > claims.count)) return undefined;
    claims.consumer = consumer;
    claims.split = split;
  }
  return { claims, payload: parts.slice(0, 7 + splitFields).join('.'), mac };
}

/** Whether the receipt's signature is the ledger's under `secret` (constant time). */
export function signatureHolds(secret: string, payload: string, mac: string): boolean {
  const expected = Buffer.from(sign(secret, payload));
  const given = Buffer.from(mac);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/**
 * How long a grant of this plan can be given back: twice the permit validity, plus GIVE_BACK_SLACK_MS. Unused
 * permits are given back when they lapse, within their validity.
 */
export const receiptTtlMs = (plan: { validityMs: number }): number =>
  2 * plan.validityMs + GIVE_BACK_SLACK_MS;
