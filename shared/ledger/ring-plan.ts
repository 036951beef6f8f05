import type { RateLimit } from '../config/rate-limits.js';

/**
 * How the rate-limit settings of a credential set become rings of slot counters.
 * A limit "L per W" gets a ring of slots of W/60 covering W + D (D = marginSeconds): a permit granted at g may
 * be sent until g + V (V ≤ D), so any send span of length W only holds grants of a grant span of W + D.
 */
export const SLOTS_PER_WINDOW = 60;
/**
 * Slots per window of a class's rings in item format 2: a class's limits are lower and its grants rarer, and
 * coarser slots keep four classes' rings within one write unit. The sub-slot of each slot's latest grant still
 * frees it within 1/36th of a slot of its exact time (5 s slots of a minute: 0.14 s); the bound holds for any slot.
 */
export const CLASS_SLOTS_PER_WINDOW = 12;
/**
 * How the ledger item is written. 1: the text rings release N-1 reads (the default, until every running release
 * reads format 2: docs/deploying.md, "Rolling forward and back"). 2: packed (state-codec.ts), which fits the
 * general limits and four classes in one write unit; release N-1 cannot read it and fails closed on it.
 */
export type ItemFormat = 1 | 2;
/** Format 2 keeps a vendor cap's end in units of this many ms after the item's time, rounded up (never shorter). */
export const CAP_UNTIL_MS = 10;
/** Each slot also keeps the 1/36th part of it that holds its latest grant, so a slot frees almost on time. */
export const SUB_SLOTS = 36;
export const GENERAL_SCOPE = '*';
/** The ring of a general window's shared part, when the window has reservations (see ReservedWindow). */
export const SHARED_SCOPE = '~';
/** The ring of a consumer's reservation in a general window. */
export const reservedScope = (consumer: string): string => `@${consumer}`;
export interface RingSpec {
  /** `<scope>/<window ms, base 36>[.<slots per window, base 36>]` (see ringKey): names the ring in the stored item. */
  key: string;
  /** GENERAL_SCOPE or a class name. */
  scope: string;
  limit: number;
  windowSeconds: number;
  windowMs: number;
  /** Slots per window (SLOTS_PER_WINDOW, or CLASS_SLOTS_PER_WINDOW for a class in item format 2). */
  slots: number;
  slotMs: number;
  /** W + D: the grant span in which at most `limit` grants may fall. */
  spanMs: number;
  /** Slots kept: every slot that can intersect a span ending at or after the newest slot. */
  length: number;
}

/**
 * Reservations in one general window of limit L: consumer c holds R_c, and S = L - sum(R_c) is shared.
 * Every grant of k is split: a = what of k its consumer's reservation ring still has room for (0 without a
 * reservation), b = k - a. `a` is recorded in the consumer's ring (limit R_c), `b` in the shared ring (limit S),
 * k in the general ring (what the operator sees). A grant needs room for a in the first (true by choice of a)
 * and b in the second, nothing else. Proof of the bound: every ring holds at most its limit in any span (each
 * grant checked it, give-backs only lower it, the ring is conservative: ring.ts), and the general ring's
 * grants of a span are exactly the sum of the reservation rings' and the shared ring's in that span, so at
 * most sum(R_c) + S = L. The guarantee: a consumer that asks for k with room for k in its own ring gets a = k,
 * b = 0, so nothing the others did can refuse it for quota (a vendor cooldown, a vendor cap, or a class limit
 * still can: those are the vendor's word, or limits it holds no reservation in). No lending: an unused
 * reservation stays unused. Not only the simplest choice: a consumer with u < R used may ask for R - u the
 * next millisecond, and a permit lent at t counts for the window plus margin after t, so a loan could only be
 * repaid by breaking the bound or the guarantee; bounding loans in time needs a bound on the reserved
 * consumer's demand, which the guarantee does not assume. What it costs, measured: docs/design.md, "Reservations".
 */
export interface ReservedWindow {
  shared: RingSpec;
  /** By consumer name. */
  reserved: ReadonlyMap<string, RingSpec>;
}

export interface LimitPlan {
  general: RingSpec[];
  /** By general ring key: the windows with reservations (none: empty, and the ledger is as it was without). */
  reserved: ReadonlyMap<string, ReservedWindow>;
  classes: ReadonlyMap<string, RingSpec[]>;
  /**
   * The classes configured with no limits (`[]`): their rings are the probe or what was learned
   * (learned-limits.ts), and the item is sized for the most they can learn.
   */
  learned: ReadonlySet<string>;
  /**
   * Windows each learned class may keep (learned-limits.ts, rule M2): MAX_LEARNED_WINDOWS where the item has room
   * for every learned class at its worst with them, else MIN_LEARNED_WINDOWS.
   */
  learnedWindows: number;
  marginMs: number;
  validityMs: number;
  /** The longest span of any ring. */
  maxSpanMs: number;
  /** The most bytes the ledger item of this plan can take (ledgerItemBound). */
  itemBytesBound: number;
  /** How the item is written (ItemFormat). */
  itemFormat: ItemFormat;
  /** How long after its last full write the state still matters: grants go up to a slot later, then span. */
  retainMs: number;
  /**
   * What the reservations are ('' without any; else 8 characters of a hash of every reserved window's shared
   * and reserved limits), kept in the ledger item. Reservations changed on a set whose rings hold grants: the
   * new shared and reservation rings know nothing of the grants before, so for one span after the change the
   * general rings of reserved windows are checked too (LedgerState.reservationsChangedAt). The bound holds
   * across the change; the guarantee resumes once the grants from before have left the span.
   */
  reservationsKey: string;
  /**
   * The general ring of a window with reservations is checked against its limit like any ring, not only for a
   * span after the reservations changed: a Region's share of the window (region-share.ts) is on the window.
   */
  checkReserved?: boolean;
  /**
   * By learned ring key: what a report counted for the window it taught (learned-store.ts `sd`: `n` at ledger time
   * `at`, written at learned version `v`, of the ledger key tagged `k`), while it can still be in the ring's span: a
   * ledger that first holds the ring seeds it from this (ledger-state.ts seedFromLearned).
   */
  seeds?: ReadonlyMap<string, { n: number; at: number; v: number; k?: string }>;
}

export const slotMsFor = (windowMs: number, slots = SLOTS_PER_WINDOW): number =>
  Math.max(1, Math.floor(windowMs / slots));
export const ringKey = (scope: string, windowMs: number, slots = SLOTS_PER_WINDOW): string =>
  `${scope}/${windowMs.toString(36)}${slots === SLOTS_PER_WINDOW ? '' : `.${slots.toString(36)}`}`;
/**
 * A limit's window as the item's cap windows (`cw`, state-codec.ts) name it: whole seconds in base 36 (`1o` for a
 * minute, `2s0` for an hour), else `.` and milliseconds in base 36.
 */
export const windowCode = (windowMs: number): string =>
  windowMs % 1000 === 0 ? (windowMs / 1000).toString(36) : `.${windowMs.toString(36)}`;
/** Slots a ring keeps: every slot that can intersect a span (window + margin) ending at or after the newest slot. */
export const ringLength = (windowMs: number, marginMs: number, slotMs: number): number =>
  Math.ceil((windowMs + marginMs) / slotMs) + 1;

/** Ring keys read so far (a process sees a few): every item's rings are read by key at every operation. */
const parsedRingKeys = new Map<string, Readonly<{ scope: string; windowMs: number; slotMs: number }>>();
const MAX_PARSED_RING_KEYS = 1000;

/** What a ring key says: its scope, window and slot length (every process reads a stored ring the same way). */
export function parseRingKey(key: string): Readonly<{ scope: string; windowMs: number; slotMs: number }> {
  const known = parsedRingKeys.get(key);
  if (known) return known;
  const at = key.lastIndexOf('/');
  const [window = '', slots] = key.slice(at + 1).split('.');
  const windowMs = Number.parseInt(window, 36);
  const perWindow = slots === undefined ? SLOTS_PER_WINDOW : Number.parseInt(slots, 36);
  const parsed = { scope: key.slice(0, at), windowMs, slotMs: slotMsFor(windowMs, perWindow) };
  if (parsedRingKeys.size >= MAX_PARSED_RING_KEYS) parsedRingKeys.clear();
  parsedRingKeys.set(key, parsed);
  return parsed;
}

/** The rings of the learned classes, as learned-limits.ts learnedRingLimits says (absent: the probe). */
export type LearnedRings = Readonly<Record<string, readonly RateLimit[]>>;

/** Every ring of the plan: general, classes', shared and reservations'. */
export function allRings(plan: LimitPlan): RingSpec[] {
  return [
    ...plan.general,
    ...[...plan.classes.values()].flat(),
    ...[...plan.reserved.values()].flatMap((w) => [w.shared, ...w.reserved.values()]),
  ];
}

/**
 * The most one grant of `cls` can ever give `consumer` (its configured name, if any): the smallest limit, where
 * a window with reservations gives the shared part plus the consumer's own reservation there.
 */
export function largestGrant(plan: LimitPlan, cls: string | undefined, consumer: string | undefined): number {
  return Math.min(
    ...ringsFor(plan, cls).map((spec) => {
      const window = plan.reserved.get(spec.key);
      if (!window) return spec.limit;
      return window.shared.limit + ((consumer && window.reserved.get(consumer)?.limit) || 0);
    }),
  );
}

/** `consumer` if it holds a reservation in the plan (only such a consumer is named, in its receipt too), else undefined. */
export const reservedConsumer = (plan: LimitPlan, consumer: string | undefined): string | undefined =>
  consumer !== undefined && [...plan.reserved.values()].some((window) => window.reserved.has(consumer))
    ? consumer
    : undefined;

/** The rings a permit of `cls` counts against: the general ones, then the class's. */
export function ringsFor(plan: LimitPlan, cls: string | undefined): RingSpec[] {
  if (cls === undefined) return plan.general;
  return [...plan.general, ...(plan.classes.get(cls) ?? [])];
}

/** Characters of LimitPlan.reservationsKey (when there are reservations). */
export const RESERVATIONS_KEY_LENGTH = 8;
