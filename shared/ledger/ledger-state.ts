import { boundClassRings, restoreClassRings, seedFromLearned } from './learned-rings.js';
import { aliveReceiptIds } from './receipts.js';
import type { RegionShare } from './region-share.js';
import { earliestFit, emptyRing, isEmptyRing, type Ring, recordGrant, shiftRing, usedAt } from './ring.js';
import {
  GENERAL_SCOPE,
  type LimitPlan,
  parseRingKey,
  type ReservedWindow,
  type RingSpec,
  ringLength,
  ringsFor,
} from './ring-plan.js';
import type { DenialReason, WindowRemaining } from './types.js';
import { normalizeCaps, type VendorCap } from './vendor-caps.js';

/** The tag of a seed's ledger key, where learned-reports.ts has long imported it from (learned-rings.ts). */

/**
 * The pure core of the rate ledger: the state of one access token and what a grant or a question about what
 * remains does to it (a give-back: operations/give-back.ts returnPermits; a learned class's rings:
 * learned-rings.ts). No I/O and no clock: the adapter passes the ledger time `g` and persists.
 */

/** The furthest Retry-After a caller asked for beyond what its report warranted alone (vendor-feedback.ts). */
export interface CooldownClaim {
  /** callerTag of the reporting caller. */
  caller: string;
  until: number;
}

export interface LedgerState {
  /** 0 while no item exists. Every write is conditional on it; a full write increments it. */
  version: number;
  /** Ledger time of the last full write (epoch ms); each ring's head slot is the slot of this time. */
  time: number;
  /** By ring key (see RingSpec.key). */
  rings: Map<string, Ring>;
  /** No grant before this (epoch ms): a vendor 429's Retry-After, as far as the reports warrant it. */
  cooldownUntil: number;
  /** The furthest unwarranted Retry-After reported, and by whom: another caller's report may corroborate it. */
  cooldownClaim: CooldownClaim | undefined;
  caps: VendorCap[];
  /** Ids of the receipts given back that could still be presented again (see receipts.ts). */
  spent: Set<string>;
  /** Ids of the writes since the last full write, that one's included (see receipts.ts). */
  writeIds: Set<string>;
  /** Ids of the writes before the last full write, newest first, at most CARRIED_WRITE_IDS (see receipts.ts). */
  carriedWriteIds: string[];
  /** LimitPlan.reservationsKey of the last grant's plan ('' none). */
  reservationsKey: string;
  /** When a grant found the reservations changed while rings held grants (0: never): see LimitPlan. */
  reservationsChangedAt: number;
  /** The item's receipt secret; undefined until the item is first written. */
  secret: string | undefined;
  /**
   * The newest learned view (learned-store.ts, its version) any grant in the item was decided under (0: none).
   * A process whose view is older reads the learned limits again before it decides (dynamo-ledger.ts).
   */
  learnedVersion: number;
  /** This Region's share of the budgets (region-share.ts), once one was adopted; undefined without Regions. */
  share?: RegionShare | undefined;
  /** Asks a regional ledger denied, ever (`dq`, state-codec.ts): read only, never part of a full write. */
  asked?: number;
}

/** For remainingAt: every limit of the settings, general and of every class. */
export const ALL_CLASSES = Symbol('all classes');

export const emptyState = (version = 0): LedgerState => ({
  version,
  time: 0,
  rings: new Map(),
  cooldownUntil: 0,
  cooldownClaim: undefined,
  caps: [],
  spent: new Set(),
  writeIds: new Set(),
  carriedWriteIds: [],
  reservationsKey: '',
  reservationsChangedAt: 0,
  secret: undefined,
  learnedVersion: 0,
  share: undefined,
});

/**
 * A working copy of the state at ledger time g ≥ state.time: rings moved to g's slots (keeping what a span with
 * margin `marginMs` can still reach), expired caps dropped. Mutated by the operations below.
 */
export function stateAt(state: LedgerState, g: number, marginMs: number): LedgerState {
  const rings = new Map<string, Ring>();
  for (const [key, ring] of state.rings) {
    const { windowMs, slotMs } = parseRingKey(key);
    const moved = shiftRing(ring, slotMs, state.time, g, ringLength(windowMs, marginMs, slotMs));
    if (!isEmptyRing(moved)) rings.set(key, moved);
  }
  return {
    version: state.version,
    time: g,
    rings,
    cooldownUntil: state.cooldownUntil > g ? state.cooldownUntil : 0,
    cooldownClaim:
      state.cooldownClaim && state.cooldownClaim.until > g ? { ...state.cooldownClaim } : undefined,
    caps: state.caps.filter((cap) => cap.until > g).map((cap) => ({ ...cap })),
    spent: aliveReceiptIds(state.spent, g),
    writeIds: new Set(state.writeIds),
    carriedWriteIds: [...state.carriedWriteIds],
    reservationsKey: state.reservationsKey,
    reservationsChangedAt: state.reservationsChangedAt,
    secret: state.secret,
    learnedVersion: state.learnedVersion,
    share: state.share,
    ...(state.asked === undefined ? {} : { asked: state.asked }),
  };
}

const ringOf = (state: LedgerState, spec: RingSpec): Ring => state.rings.get(spec.key) ?? emptyRing();

const capApplies = (cap: VendorCap, cls: string | undefined): boolean =>
  cap.scope === GENERAL_SCOPE || cap.scope === cls;

/**
 * Per general window with reservations (by its ring key): how much of a grant its consumer's reservation took
 * (a of ReservedWindow); the rest came from the shared part. Carried by the receipt, so that a give-back
 * returns permits to the rings they were counted in.
 */
export type ReservedSplit = [generalKey: string, reserved: number][];

/**
 * What a grant did to the state, as the write loop is told it (item/write-loop.ts grantAdditions): the grants it
 * recorded, per ring key, at g; and whether it changed anything else (a ring seeded, restored or dropped, a vendor
 * cap counted down, the reservations' key): then only a full write carries it.
 */
export interface GrantEffect {
  recorded: Map<string, number>;
  rewrote: boolean;
}

export type AcquireOutcome =
  | {
      granted: true;
      count: number;
      grantedAt: number;
      validUntil: number;
      remaining: WindowRemaining[];
      /** Present when the plan has reservations: one entry per reserved window. */
      split?: ReservedSplit;
      effect: GrantEffect;
    }
  | { granted: false; retryAt: number; reason: DenialReason; remaining: WindowRemaining[] };

interface WindowShare {
  general: RingSpec;
  window: ReservedWindow;
  own: RingSpec | undefined;
  /** From the consumer's reservation. */
  a: number;
  /** From the shared part. */
  b: number;
  /** When this window has room for the grant (as split now, or all of it in the reservation). */
  fitAt: number;
}

/**
 * How a grant of k by `consumer` splits in each reserved window (ReservedWindow in limit-plan.ts): as much as
 * its reservation ring has room for now, the rest shared. When the shared part has no room for the rest, the
 * window fits again at the earlier of: the shared part has room for it, the reservation has room for all k.
 */
function reservedShares(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  k: number,
  consumer: string | undefined,
): WindowShare[] {
  const shares: WindowShare[] = [];
  for (const general of plan.general) {
    const window = plan.reserved.get(general.key);
    if (!window) continue;
    const own = consumer === undefined ? undefined : window.reserved.get(consumer);
    const room = own ? Math.max(0, own.limit - usedAt(own, ringOf(state, own), g)) : 0;
    const a = Math.min(k, room);
    const b = k - a;
    let fitAt = g;
    const shared = window.shared;
    if (b > 0 && b <= shared.limit) {
      fitAt = earliestFit(shared, ringOf(state, shared), g, b);
      if (own && k <= own.limit) fitAt = Math.min(fitAt, earliestFit(own, ringOf(state, own), g, k));
    } else if (b > 0 && own && k - shared.limit <= own.limit) {
      // More than the shared part can ever hold: when its own ring has room for the excess and the shared
      // part is empty (a late hint, never an early one).
      fitAt = Math.max(
        earliestFit(own, ringOf(state, own), g, k - shared.limit),
        earliestFit(shared, ringOf(state, shared), g, shared.limit),
      );
    } else if (b > 0) fitAt = Number.POSITIVE_INFINITY; // refused before (largestGrant)
    shares.push({ general, window, own, a, b, fitAt });
  }
  return shares;
}

const record = (state: LedgerState, spec: RingSpec, g: number, k: number, effect: GrantEffect): void => {
  const ring = ringOf(state, spec);
  recordGrant(ring, spec.slotMs, g, k);
  state.rings.set(spec.key, ring);
  effect.recorded.set(spec.key, (effect.recorded.get(spec.key) ?? 0) + k);
};

/**
 * Grants `k` at time g (recording them) or says when enough room will exist, and why not now. `consumer`: the
 * asking consumer's configured name, which picks its reservations (if the plan has any for it).
 */
export function acquire(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  k: number,
  cls: string | undefined,
  consumer?: string,
  ledgerKey?: string,
): AcquireOutcome {
  // Caps in force are counted down by a grant that applies to them (below): a full write, as is every grant while
  // one is in force (I6). Caps an older release wrote since (vendor-caps.ts): each to its limit, so the item keeps
  // one per limit.
  const effect: GrantEffect = { recorded: new Map(), rewrote: state.caps.length > 0 };
  if (state.caps.length > 0) normalizeCaps(state, plan, g);
  // A learned class's rings seeded or restored (learned-rings.ts).
  if (cls !== undefined && plan.learned.has(cls)) {
    const seeded = seedFromLearned(state, plan, cls, g, ledgerKey);
    const restored = restoreClassRings(state, plan, cls, g);
    effect.rewrote ||= seeded || restored;
  }
  // Reservations other than those the rings were kept by, while rings hold grants: see LimitPlan.reservationsKey.
  if (state.reservationsKey !== plan.reservationsKey) {
    if (state.rings.size > 0) state.reservationsChangedAt = g;
    state.reservationsKey = plan.reservationsKey;
    effect.rewrote = true;
  }
  // The general rings of reserved windows are recorded, not checked: their shared and reservation rings carry
  // the bound (ReservedWindow); except for a span after the reservations changed, when those know too little.
  const shares = reservedShares(state, plan, g, k, consumer);
  const rings = ringsFor(plan, cls);
  const specs = rings.filter((spec) => !plan.reserved.has(spec.key));
  const guarded = rings.filter(
    (spec) =>
      plan.reserved.has(spec.key) &&
      (plan.checkReserved === true || g < state.reservationsChangedAt + spec.spanMs + spec.slotMs),
  );
  const cooldownAt = Math.max(state.cooldownUntil, g);
  const quotaAt = Math.max(
    g,
    ...[...specs, ...guarded].map((spec) => earliestFit(spec, ringOf(state, spec), g, k)),
    ...shares.map((share) => share.fitAt),
  );
  const capAt = Math.max(
    g,
    ...state.caps.filter((cap) => capApplies(cap, cls) && k > cap.remaining).map((cap) => cap.until),
  );
  const retryAt = Math.max(cooldownAt, quotaAt, capAt);
  if (retryAt > g) {
    const reason: DenialReason = cooldownAt > g ? 'COOLDOWN' : quotaAt > g ? 'QUOTA' : 'VENDOR_CAP';
    return { granted: false, retryAt, reason, remaining: remainingAt(state, plan, g, cls) };
  }
  for (const spec of specs) record(state, spec, g, k, effect);
  // Every other ring of the class in the item too (a process with another learned view keeps it): its grants
  // count against the rings of every view, whichever process decides (docs/class-limits.md, "Processes").
  if (cls !== undefined) {
    for (const key of [...state.rings.keys()]) {
      const { scope, slotMs } = parseRingKey(key);
      if (scope === cls && !specs.some((spec) => spec.key === key))
        record(state, { key, slotMs } as RingSpec, g, k, effect);
    }
    if (plan.learned.has(cls) && boundClassRings(state, plan, cls)) effect.rewrote = true;
  }
  for (const share of shares) {
    record(state, share.general, g, k, effect);
    if (share.a > 0 && share.own) record(state, share.own, g, share.a, effect);
    if (share.b > 0) record(state, share.window.shared, g, share.b, effect);
  }
  for (const cap of state.caps) if (capApplies(cap, cls)) cap.remaining -= k;
  return {
    granted: true,
    count: k,
    grantedAt: g,
    validUntil: g + plan.validityMs,
    remaining: remainingAt(state, plan, g, cls),
    ...(plan.reserved.size > 0 ? { split: shares.map((share) => [share.general.key, share.a]) } : {}),
    effect,
  };
}

/**
 * What could be granted at g, per limit: the general limits (and the class's, when `cls` is given; every class's
 * for ALL_CLASSES), lowered by the vendor caps that apply, and 0 during a cooldown.
 */
export function remainingAt(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  cls: string | undefined | typeof ALL_CLASSES,
): WindowRemaining[] {
  const specs =
    cls === ALL_CLASSES ? [...plan.general, ...[...plan.classes.values()].flat()] : ringsFor(plan, cls);
  return specs.map((spec) => {
    const scope = spec.scope === GENERAL_SCOPE ? undefined : spec.scope;
    const remaining = leftAt(state, spec, g, scope);
    const entry: WindowRemaining = { limit: spec.limit, windowSeconds: spec.windowSeconds, remaining };
    if (scope !== undefined) entry.class = scope;
    return entry;
  });
}

/**
 * What is left of one ring at g: its limit less what it holds, lowered by the vendor caps of `cls` (undefined:
 * the general ones), 0 during a cooldown. For a reservation's or the shared part's ring, pass undefined.
 */
export function leftAt(state: LedgerState, spec: RingSpec, g: number, cls: string | undefined): number {
  let remaining = Math.max(0, spec.limit - usedAt(spec, ringOf(state, spec), g));
  for (const cap of state.caps)
    if (cap.until > g && capApplies(cap, cls)) remaining = Math.min(remaining, Math.max(0, cap.remaining));
  return state.cooldownUntil > g ? 0 : remaining;
}
