import { createHash } from 'node:crypto';
import { LedgerUnavailableError } from '../errors.js';
import { emptyState, type LedgerState } from '../ledger-state.js';
import { CALLER_TAG_LENGTH, isReceiptId, receiptIdExpiry } from '../receipts.js';
import { decodeShare, decodeShareVersion, encodeShare, encodeShareVersion } from '../region-share.js';
import { type Ring, subSlot } from '../ring.js';
import { type ItemFormat, parseRingKey, RESERVATIONS_KEY_LENGTH, windowCode } from '../ring-plan.js';
import type { VendorCap } from '../vendor-caps.js';
import { CAP_FINGERPRINT_LENGTH } from './item-size.js';
import { decodePacked, encodePacked } from './packed-codec.js';

/** A write id as written (item-size.ts WRITE_ID_LENGTH characters, write-loop.ts newWriteId). */
const isWriteId = (id: string): boolean => /^[A-Za-z0-9_-]{5}$/.test(id);

/**
 * The ledger item, compactly, within one write unit (1 KB). Two formats (limit-plan.ts, ItemFormat): 1, the text
 * below, which the previous release reads; 2, packed (packed-codec.ts), which that release refuses to read.
 * The head slot of each ring (the slot of `time`) is kept apart, as a number per ring, so that concurrent grants
 * in the same slot can add to it without rewriting the rest (see write-loop.ts grantAdditions). The older slots of a ring are
 * one string of base-36 counters: each non-empty slot is `<sub-slot digit><count>`, an empty one is empty,
 * newest first, separated by commas; a ring is `<scope>/<window ms>=<slots>`, e.g. `reports/1aao=z1e,,31`
 * (window 60 000 ms; 50 permits one slot before the head, 1 three slots before it).
 */
export interface StoredLedger {
  format: ItemFormat;
  /** 0 while no item exists; +1 on every full write. */
  version: number;
  /** Head-slot additions since the last full write (they leave `version` alone). */
  fastWrites: number;
  time: number;
  /** Format 1: the older slots of every ring. */
  rings?: string;
  /** Format 2: the older slots, caps, carried write ids and spent receipt ids (packed-codec.ts). */
  packed?: Uint8Array;
  /** The head slot's count, by ring key (format 1) or by the ring's index in the packed rings (format 2). */
  heads: Record<string, number>;
  /** Format 1, by ring key: the sub-slot of the head's latest grant. */
  headSubs: Record<string, number>;
  /** Format 2: the latest head addition's offset after `time` (ms); it dates every head's latest grant. */
  headOffset?: number;
  cooldownUntil?: number;
  /** Format 1: `<scope>:<remaining>:<until ms>` per cap, base 36, `;`-separated: what release N-1 reads too. */
  caps?: string;
  /**
   * Format 1: the limit (window) of each cap, in order, after a fingerprint of the `caps` text they belong to:
   * `<fingerprint>:<window code>,...` (limit-plan.ts windowCode; empty: not known). An older release rewrites
   * `caps` without it: the fingerprint then no longer matches, and the windows are not known (vendor-caps.ts).
   * (Format 2 packs each cap with its window.)
   */
  capWindows?: string;
  /** LedgerState.cooldownClaim: the caller's tag, then the end in Unix seconds, base 36. */
  cooldownClaim?: string;
  /** Format 1: spent receipt ids (receipts.ts); a string set in the item. */
  spent: string[];
  /** Write ids since the last full write (receipts.ts); a string set in the item. */
  writeIds: string[];
  /** Format 1: write ids of earlier writes, newest first (receipts.ts, CARRIED_WRITE_IDS); comma-separated. */
  carriedWriteIds: string[];
  /** LedgerState.reservationsKey, when not ''. */
  reservationsKey?: string;
  /** LedgerState.reservationsChangedAt, while it still matters. */
  reservationsChangedAt?: number;
  /** The receipt secret (base64url), set once when the item is created. */
  secret?: string;
  /** LedgerState.learnedVersion, when not 0 (`lv`: an attribute release N-1 leaves as it is). */
  learnedVersion?: number;
  /** LedgerState.share (region-share.ts, encodeShare), when one was adopted (`rs`: release N-1 leaves it as it is). */
  share?: string;
  /**
   * `rsv`: the version of the share in `rs` (region-share.ts, encodeShareVersion), when it has one. A new attribute
   * (issue 33): release N-1 neither reads nor removes it. Written by adoptShare only: every full write keeps it as
   * the state read it; a full write of a share without one removes it.
   */
  shareVersion?: string;
  /**
   * `dq`: asks a regional ledger denied, counted up (ADD) and never written by a full write: what a Region's lease
   * renewer counts as its demand besides its grants (shared/regions/renewer.ts). Read only.
   */
  asked?: number;
  /** Unix seconds: DynamoDB's TTL deletes the item some time after; reads ignore it from then on. */
  purgeAt: number;
}

/** Kept this long after the state stops mattering, so that a quiet token does not lose its version at once. */
export const PURGE_SLACK_SECONDS = 3600;

// Scopes: `*` general, a class name, `~` the shared part of a reserved window, `@<consumer>` a reservation.
const RING = /^([a-z*~@][a-z0-9-]*\/[0-9a-z]+(?:\.[0-9a-z]+)?)=((?:[0-9a-z]{2,})?(?:,(?:[0-9a-z]{2,})?)*)$/;
const CAP = /^([a-z*][a-z0-9-]*):([0-9a-z]+):([0-9a-z]+)$/;
const CAP_WINDOWS = new RegExp(
  `^([A-Za-z0-9_-]{${CAP_FINGERPRINT_LENGTH}}):((?:\\.?[0-9a-z]+)?(?:,(?:\\.?[0-9a-z]+)?)*)$`,
);
const COOLDOWN_CLAIM = new RegExp(`^([A-Za-z0-9_-]{${CALLER_TAG_LENGTH}})([0-9a-z]{1,8})$`);
const RING_KEY = /^[a-z*~@][a-z0-9-]*\/[0-9a-z]+(?:\.[0-9a-z]+)?$/;
const RESERVATIONS_KEY = new RegExp(`^[A-Za-z0-9_-]{${RESERVATIONS_KEY_LENGTH}}$`);

/** Ties the cap windows to the exact `caps` text they were written with. */
const capFingerprint = (caps: string): string =>
  createHash('sha256').update(caps).digest('base64url').slice(0, CAP_FINGERPRINT_LENGTH);

const decodeWindow = (code: string): number | undefined =>
  code === ''
    ? undefined
    : code.startsWith('.')
      ? Number.parseInt(code.slice(1), 36)
      : Number.parseInt(code, 36) * 1000;

/** The windows of the caps in `caps` when `capWindows` was written with exactly that text; else none known. */
function capWindowsOf(caps: string, capWindows: string | undefined, count: number): (number | undefined)[] {
  if (capWindows === undefined) return [];
  const match = CAP_WINDOWS.exec(capWindows);
  if (!match || match[2] === undefined) return unreadable('cap windows');
  const codes = match[2].split(',');
  return match[1] === capFingerprint(caps) && codes.length === count ? codes.map(decodeWindow) : [];
}

const encodeSlots = (ring: Ring, from: number): string =>
  ring.counts
    .slice(from)
    .map((count, j) => (count > 0 ? `${(ring.subs[j + from] ?? 0).toString(36)}${count.toString(36)}` : ''))
    .join(',')
    .replace(/,+$/, '');

/** `retainMs`: how long after `time` the rings still matter (the longest span of the settings). */
export function encodeState(
  state: LedgerState,
  retainMs: number,
  format: ItemFormat = 1,
  fastWrites = 0,
): StoredLedger {
  const heads: Record<string, number> = {};
  const headSubs: Record<string, number> = {};
  const rings: string[] = [];
  let index = 0;
  for (const [key, ring] of state.rings) {
    if ((ring.counts[0] ?? 0) > 0) {
      heads[format === 2 ? String(index) : key] = ring.counts[0] ?? 0;
      headSubs[key] = ring.subs[0] ?? 0;
    }
    index++;
    const older = encodeSlots(ring, 1);
    if (older !== '') rings.push(`${key}=${older}`);
  }
  const caps = state.caps
    .map((c) => `${c.scope}:${c.remaining.toString(36)}:${c.until.toString(36)}`)
    .join(';');
  const lastRelevant = Math.max(
    state.time + retainMs,
    state.cooldownUntil,
    state.cooldownClaim?.until ?? 0,
    ...state.caps.map((c) => c.until),
  );
  const stored: StoredLedger = {
    format,
    version: state.version,
    fastWrites,
    time: state.time,
    heads,
    headSubs: format === 2 ? {} : headSubs,
    spent: format === 2 ? [] : [...state.spent].sort(),
    writeIds: [...state.writeIds].sort(),
    carriedWriteIds: format === 2 ? [] : state.carriedWriteIds,
    purgeAt:
      Math.ceil(Math.max(lastRelevant, ...[...state.spent].map(receiptIdExpiry)) / 1000) +
      PURGE_SLACK_SECONDS,
  };
  if (state.secret !== undefined) stored.secret = state.secret;
  if (state.learnedVersion > 0) stored.learnedVersion = state.learnedVersion;
  if (state.share !== undefined) {
    stored.share = encodeShare(state.share);
    const version = encodeShareVersion(state.share);
    if (version !== undefined) stored.shareVersion = version;
  }
  if (state.reservationsKey !== '') stored.reservationsKey = state.reservationsKey;
  if (state.reservationsChangedAt > 0 && state.reservationsChangedAt + retainMs > state.time)
    stored.reservationsChangedAt = state.reservationsChangedAt;
  if (state.cooldownUntil > 0) stored.cooldownUntil = state.cooldownUntil;
  if (state.cooldownClaim)
    stored.cooldownClaim = `${state.cooldownClaim.caller}${Math.floor(state.cooldownClaim.until / 1000).toString(36)}`;
  if (format === 2) {
    // Every ring the state holds is in the directory (its head's index), even one with only a head.
    stored.packed = encodePacked(
      {
        rings: state.rings,
        caps: state.caps,
        carriedWriteIds: state.carriedWriteIds,
        spent: [...state.spent].sort(),
      },
      state.time,
    );
    return stored;
  }
  if (rings.length > 0) stored.rings = rings.join(';');
  if (caps) {
    stored.caps = caps;
    const windows = state.caps.map((c) => (c.windowMs === undefined ? '' : windowCode(c.windowMs)));
    stored.capWindows = `${capFingerprint(caps)}:${windows.join(',')}`;
  }
  return stored;
}

const unreadable = (what: string): never => {
  throw new LedgerUnavailableError(`ledger item unreadable: ${what}`);
};

const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

function decodeSlots(text: string, ring: Ring): void {
  for (const slot of text.split(',')) {
    ring.counts.push(slot === '' ? 0 : Number.parseInt(slot.slice(1), 36));
    ring.subs.push(slot === '' ? 0 : Number.parseInt(slot.slice(0, 1), 36));
  }
}

/** The state an item holds; an item past its purge time (TTL deletes lazily) holds nothing but its version. */
export function decodeState(stored: StoredLedger, now: number): LedgerState {
  if (!Number.isSafeInteger(stored.version) || stored.version < 1) unreadable('version');
  if (!isCount(stored.fastWrites)) unreadable('fastWrites');
  if (!isCount(stored.time)) unreadable('time');
  if (!Number.isFinite(stored.purgeAt)) unreadable('purgeAt');
  const state = emptyState(stored.version);
  if (stored.secret !== undefined) {
    if (!/^[A-Za-z0-9_-]{22}$/.test(stored.secret)) unreadable('secret');
    state.secret = stored.secret;
  }
  // Write ids matter even in an item past its purge time: they say whether a write just applied.
  for (const id of stored.writeIds) {
    if (!isWriteId(id)) unreadable('write ids');
    state.writeIds.add(id);
  }
  const packed =
    stored.format === 2
      ? decodePacked(stored.packed ?? new Uint8Array(), stored.time, unreadable)
      : {
          rings: new Map<string, Ring>(),
          caps: [],
          carriedWriteIds: stored.carriedWriteIds,
          spent: stored.spent,
        };
  for (const id of packed.carriedWriteIds) {
    if (!isWriteId(id)) unreadable('carried write ids');
    state.carriedWriteIds.push(id);
  }
  if (stored.learnedVersion !== undefined) {
    if (!isCount(stored.learnedVersion)) unreadable('learned version');
    state.learnedVersion = stored.learnedVersion;
  }
  // A Region's share holds whatever the purge time says: it is never one that an idle item may forget.
  if (stored.share !== undefined) {
    const share = decodeShare(stored.share) ?? unreadable('region share');
    const version = decodeShareVersion(stored.shareVersion, share);
    state.share = version === undefined ? share : { ...share, version };
  }
  if (stored.asked !== undefined && isCount(stored.asked)) state.asked = stored.asked;
  if (stored.purgeAt * 1000 <= now) return state;
  if (stored.reservationsKey !== undefined) {
    if (!RESERVATIONS_KEY.test(stored.reservationsKey)) unreadable('reservations key');
    state.reservationsKey = stored.reservationsKey;
  }
  if (stored.reservationsChangedAt !== undefined) {
    if (!isCount(stored.reservationsChangedAt)) unreadable('reservations change');
    state.reservationsChangedAt = stored.reservationsChangedAt;
  }
  for (const id of packed.spent) {
    if (!isReceiptId(id)) unreadable('spent receipts');
    state.spent.add(id);
  }
  state.time = stored.time;
  state.cooldownUntil = stored.cooldownUntil ?? 0;
  if (stored.cooldownClaim !== undefined) {
    const match = COOLDOWN_CLAIM.exec(stored.cooldownClaim);
    if (!match?.[1] || !match[2]) return unreadable('cooldown claim');
    state.cooldownClaim = { caller: match[1], until: Number.parseInt(match[2], 36) * 1000 };
  }
  return stored.format === 2 ? decodePackedRings(state, stored, packed) : decodeTextRings(state, stored);
}

/** `state` with format 2's rings, heads and caps (the packed part decoded: packed-codec.ts). */
function decodePackedRings(
  state: LedgerState,
  stored: StoredLedger,
  packed: { rings: Map<string, Ring>; caps: VendorCap[] },
): LedgerState {
  for (const [key, ring] of packed.rings) {
    if (!RING_KEY.test(key)) unreadable('ring key');
    state.rings.set(key, ring);
  }
  const directory = [...packed.rings.keys()];
  // Every head's latest grant was at most the latest head addition after the last full write.
  const latest = state.time + (stored.headOffset ?? 0);
  if (!isCount(stored.headOffset ?? 0)) unreadable('head offsets');
  for (const [index, count] of Object.entries(stored.heads)) {
    const key = directory[Number(index)];
    if (key === undefined || !isCount(count)) return unreadable('head slot');
    const ring = packed.rings.get(key) as Ring;
    const { slotMs } = parseRingKey(key);
    ring.counts[0] = count;
    // Within the head slot (a head addition is only made in the slot of the last full write).
    ring.subs[0] = subSlot(Math.min(latest, (Math.floor(state.time / slotMs) + 1) * slotMs - 1), slotMs);
  }
  state.caps.push(...packed.caps);
  return state;
}

/** `state` with format 1's rings (heads, then older slots) and caps. */
function decodeTextRings(state: LedgerState, stored: StoredLedger): LedgerState {
  const ringOf = (key: string): Ring => {
    if (!RING_KEY.test(key) || !(parseRingKey(key).windowMs > 0)) unreadable('ring key');
    let ring = state.rings.get(key);
    if (!ring) {
      ring = { counts: [0], subs: [0] };
      state.rings.set(key, ring);
    }
    return ring;
  };
  for (const [key, count] of Object.entries(stored.heads)) {
    const sub = stored.headSubs[key] ?? 0;
    if (!isCount(count) || !isCount(sub) || sub > 35) unreadable('head slot');
    const ring = ringOf(key);
    ring.counts[0] = count;
    ring.subs[0] = sub;
  }
  for (const part of stored.rings ? stored.rings.split(';') : []) {
    const match = RING.exec(part);
    if (!match?.[1] || match[2] === undefined) return unreadable('rings');
    decodeSlots(match[2], ringOf(match[1]));
  }
  const parts = stored.caps ? stored.caps.split(';') : [];
  const windows = capWindowsOf(stored.caps ?? '', stored.capWindows, parts.length);
  for (const [index, part] of parts.entries()) {
    const match = CAP.exec(part);
    if (!match?.[1] || !match[2] || !match[3]) return unreadable('caps');
    const cap: VendorCap = {
      scope: match[1],
      remaining: Number.parseInt(match[2], 36),
      until: Number.parseInt(match[3], 36),
    };
    const windowMs = windows[index];
    if (windowMs !== undefined) cap.windowMs = windowMs;
    state.caps.push(cap);
  }
  return state;
}
