import { createHash } from 'node:crypto';
import { PROBE_LIMIT } from './learned-limits.js';
import {
  aliveReceiptIds,
  consumerTag,
  hasMark,
  type ReceiptClaims,
  SPENT_KEPT,
  SPENT_PER_CALLER,
  spentMark,
} from './receipts.js';
import type { RegionShare } from './region-share.js';
import {
  earliestFit,
  emptyRing,
  isEmptyRing,
  type Ring,
  recordAt,
  recordGrant,
  returnGrant,
  shiftRing,
  slotEnd,
  slotIndex,
  usedAfter,
  usedAt,
} from './ring.js';
import {
  CLASS_SLOTS_PER_WINDOW,
  GENERAL_SCOPE,
  type LimitPlan,
  parseRingKey,
  type ReservedWindow,
  type RingSpec,
  ringKey,
  ringLength,
  ringsFor,
  SUB_SLOTS,
} from './ring-plan.js';
import type { DenialReason, NotRecordedReason, WindowRemaining } from './types.js';
import { normalizeCaps, type VendorCap } from './vendor-caps.js';

/**
 * The pure core of the rate ledger: the state of one access token and what a grant, a give-back or a question
 * about what remains does to it. No I/O and no clock: the adapter passes the ledger time `g` and persists.
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

export type AcquireOutcome =
  | {
      granted: true;
      count: number;
      grantedAt: number;
      validUntil: number;
      remaining: WindowRemaining[];
      /** Present when the plan has reservations: one entry per reserved window. */
      split?: ReservedSplit;
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

const record = (state: LedgerState, spec: RingSpec, g: number, k: number): void => {
  const ring = ringOf(state, spec);
  recordGrant(ring, spec.slotMs, g, k);
  state.rings.set(spec.key, ring);
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
  // Caps an older release wrote since (vendor-caps.ts): each to its limit, so the item keeps one per limit.
  if (state.caps.length > 0) normalizeCaps(state, plan, g);
  if (cls !== undefined) {
    seedFromLearned(state, plan, cls, g, ledgerKey);
    restoreClassRings(state, plan, cls, g);
  }
  // Reservations other than those the rings were kept by, while rings hold grants: see LimitPlan.reservationsKey.
  if (state.reservationsKey !== plan.reservationsKey) {
    if (state.rings.size > 0) state.reservationsChangedAt = g;
    state.reservationsKey = plan.reservationsKey;
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
  for (const spec of specs) record(state, spec, g, k);
  // Every other ring of the class in the item too (a process with another learned view keeps it): its grants
  // count against the rings of every view, whichever process decides (docs/class-limits.md, "Processes").
  if (cls !== undefined) {
    for (const key of [...state.rings.keys()]) {
      const { scope, slotMs } = parseRingKey(key);
      if (scope === cls && !specs.some((spec) => spec.key === key))
        record(state, { key, slotMs } as RingSpec, g, k);
    }
    boundClassRings(state, plan, cls);
  }
  for (const share of shares) {
    record(state, share.general, g, k);
    if (share.a > 0 && share.own) record(state, share.own, g, share.a);
    if (share.b > 0) record(state, share.window.shared, g, share.b);
  }
  for (const cap of state.caps) if (capApplies(cap, cls)) cap.remaining -= k;
  return {
    granted: true,
    count: k,
    grantedAt: g,
    validUntil: g + plan.validityMs,
    remaining: remainingAt(state, plan, g, cls),
    ...(plan.reserved.size > 0 ? { split: shares.map((share) => [share.general.key, share.a]) } : {}),
  };
}

/**
 * A learned class's ring its plan has and the item does not (a window whose limit was not in the plan a while: held
 * as tight by another of its limits, lapsed, or the probe's again) starts with the grants of the class's longest
 * ring of a window at least as long, each at the end of its slot there (the latest it can have been). That ring
 * counted every grant of the class in its span (rule 1 of "Processes that disagree"), a superset of this one's
 * span. Without it, a ring left out of the plan while a tighter limit held the class (a liar's 1 per minute over
 * a kept 7 per 15 s) came back empty when that limit ended, and the grants of its last window went uncounted: 8 in
 * 15 s at the vendor. A window the class never had, which no longer ring covers, is seeded at its learning
 * instead (seedLearnedRing).
 */
function restoreClassRings(state: LedgerState, plan: LimitPlan, cls: string, g: number): void {
  if (!plan.learned.has(cls)) return;
  for (const spec of plan.classes.get(cls) ?? []) {
    if (state.rings.has(spec.key)) continue;
    const longer = [...state.rings.keys()]
      .map((key) => ({ key, ...parseRingKey(key) }))
      .filter((r) => r.scope === cls && r.windowMs >= spec.windowMs)
      .sort((a, b) => b.windowMs - a.windowMs)[0];
    const from = longer && state.rings.get(longer.key);
    if (!longer || !from) continue;
    const ring = emptyRing();
    const head = slotIndex(g, longer.slotMs);
    from.counts.forEach((count, j) => {
      const end = slotEnd(head - j, from.subs[j] ?? SUB_SLOTS - 1, longer.slotMs);
      if (count > 0 && end > g - spec.spanMs) recordAt(ring, spec.slotMs, g, Math.min(end - 1, g), count);
    });
    if (!isEmptyRing(ring)) state.rings.set(spec.key, ring);
  }
}

/**
 * A learned ring seeded from what the report that taught it counted (the learned item's seed, LimitPlan.seeds), in a
 * ledger that decides on the seed's view for the first time (the item's learnedVersion is older than the seed's
 * write: in one Region, or in the Region that took the report, its report's write made it as new, and the report
 * seeded the ring there, seedLearnedRing). What the ledger of the other Region of two holds then: its own grants of
 * the class, not the other Region's that the vendor counted beside them. The ring is made to hold, after the
 * report's time less the window (where the vendor counted), at least the vendor's count and this ledger's grants
 * from two margins before the report on (in flight then, or since: the class's other rings hold them, rule 1 of
 * docs/class-limits.md, "Processes that disagree"): what it lacks is recorded at the report's time. Those of its
 * own grants the vendor counted are counted twice for at most a window: more, never fewer. Without it the other
 * Region took the whole learned limit on top of the vendor's count until the reporting Region's lease record named
 * the learned rings (docs/multi-region.md, "The first learning in two Regions").
 */
function seedFromLearned(
  state: LedgerState,
  plan: LimitPlan,
  cls: string,
  g: number,
  ledgerKey: string | undefined,
): void {
  if (!plan.seeds || !plan.learned.has(cls)) return;
  const decidedOn = state.learnedVersion;
  const tag = ledgerKey === undefined ? undefined : seedKeyOf(ledgerKey);
  for (const spec of plan.classes.get(cls) ?? []) {
    const seed = plan.seeds.get(spec.key);
    // Only the item of the report's ledger key counts what the vendor counted (a set's next token starts afresh).
    if (!seed || (seed.k !== undefined && seed.k !== tag)) continue;
    if (decidedOn >= seed.v || g >= seed.at + spec.spanMs) continue;
    const since = seed.at - 2 * plan.marginMs;
    let ring = state.rings.get(spec.key);
    if (!ring) {
      // Its grants since, from the class's rings (the fullest: each holds every grant of the class in its span).
      const recent = Math.max(
        0,
        ...[...state.rings].map(([key, r]) => {
          const { scope, slotMs } = parseRingKey(key);
          return scope === cls ? usedAfter({ slotMs } as RingSpec, r, g, since) : 0;
        }),
      );
      ring = emptyRing();
      if (recent > 0) recordAt(ring, spec.slotMs, g, g, recent);
    }
    const own = usedAfter(spec, ring, g, since);
    // What the ring holds where the vendor counted (whole slots only: fewer, never more).
    const held = usedAfter(spec, ring, g, seed.at - spec.windowMs + spec.slotMs);
    // Not capped by the limit: `spec` may be held to the Region's share (heldPlan), and the count is the vendor's.
    const lacking = seed.n + own - held;
    if (lacking > 0) recordAt(ring, spec.slotMs, g, seed.at, lacking);
    if (!isEmptyRing(ring)) state.rings.set(spec.key, ring);
    // Once: written with it, the item holds grants of the seed's view (a process on an older one reads it first).
    state.learnedVersion = Math.max(state.learnedVersion, seed.v);
  }
  boundClassRings(state, plan, cls);
}

/** The ledger key a seed is of, on the learned item: 8 characters of its hash (the items' keys stay apart). */
export const seedKeyOf = (ledgerKey: string): string =>
  createHash('sha256').update(ledgerKey).digest('base64url').slice(0, 8);

/**
 * Rule M3 (docs/class-limits.md): a learned class keeps in the item at most its plan's windows (learnedWindows)
 * and the probe's ring, which is what the item is sized for. A ring of the class its plan no longer has (a lapsed
 * window) keeps counting the class's grants (rule 1 of "Processes that disagree") while there is room; past it,
 * such rings go, longest window first (a window learned again is seeded anew). Without it, a liar cycling
 * through windows grows the item past its write unit.
 */
export function boundClassRings(state: LedgerState, plan: LimitPlan, cls: string): void {
  if (!plan.learned.has(cls)) return;
  const inPlan = new Set((plan.classes.get(cls) ?? []).map((spec) => spec.key));
  const probe = ringKey(cls, PROBE_LIMIT.windowSeconds * 1000, CLASS_SLOTS_PER_WINDOW);
  const others = [...state.rings.keys()]
    .filter((key) => key !== probe && !inPlan.has(key) && parseRingKey(key).scope === cls)
    .sort((a, b) => parseRingKey(b).windowMs - parseRingKey(a).windowMs);
  // The plan's rings (the probe's key is a learned 10 s window's too: then it counts as one of them).
  const learned = [...inPlan].filter((key) => state.rings.has(key)).length;
  for (const key of others.slice(0, Math.max(0, learned + others.length - plan.learnedWindows)))
    state.rings.delete(key);
}

/**
 * Why a give-back would find no place among the spent ids (receipts.ts), or undefined when it has one: its
 * caller holds its share (CALLER_SHARE), or the set is full of others' (LEDGER_BUSY). A receipt without its
 * caller's mark (issued by release N-1, during a canary or a rollback) cannot be counted in its caller's share:
 * it is recorded only while two whole shares are left beside it, so that unmarked ids and one caller's share
 * together still leave a share to everyone else.
 */
export function spentPlaceFor(
  spent: ReadonlySet<string>,
  claims: ReceiptClaims,
): NotRecordedReason | undefined {
  const mark = spentMark(claims.caller);
  if (!hasMark(claims.id, mark))
    return spent.size + 1 + 2 * SPENT_PER_CALLER <= SPENT_KEPT ? undefined : 'LEDGER_BUSY';
  if ([...spent].filter((id) => hasMark(id, mark)).length >= SPENT_PER_CALLER) return 'CALLER_SHARE';
  return spent.size < SPENT_KEPT ? undefined : 'LEDGER_BUSY';
}

/**
 * Takes back up to `k` permits of the grant a (verified, unexpired) receipt names, out of the slots they were
 * recorded in, and spends the receipt: its id joins the spent ones. 'SPENT' when it was given back already;
 * `notRecorded` when the spent ids have no place for it (spentPlaceFor): then nothing changes, the receipt is
 * not spent, and its permits age out (the ledger over-counts, which is safe). Vendor caps are not refilled:
 * the vendor may have counted the request anyway (more careful).
 */
export function giveBack(
  state: LedgerState,
  plan: LimitPlan,
  claims: ReceiptClaims,
  k: number,
): { returned: number; notRecorded?: NotRecordedReason } | 'SPENT' {
  if (state.spent.has(claims.id)) return 'SPENT';
  const notRecorded = spentPlaceFor(state.spent, claims);
  if (notRecorded) return { returned: 0, notRecorded };
  state.spent.add(claims.id);
  if (claims.grantedAt > state.time) return { returned: 0 };
  const count = Math.min(k, claims.count);
  const take = (spec: RingSpec, n: number): number => {
    const ring = state.rings.get(spec.key);
    return ring && n > 0
      ? returnGrant(ring, spec.slotMs, slotIndex(state.time, spec.slotMs), claims.grantedAt, n)
      : 0;
  };
  let returned = 0;
  for (const spec of ringsFor(plan, claims.cls)) {
    // Every ring of the grant gave back the same, unless a slot aged out in one (a longer window keeps it).
    returned = Math.max(returned, take(spec, count));
  }
  // A grant split between a reservation and the shared part (the receipt says how): the shared part first (it
  // was borrowed from everyone), then the reservation. A receipt of a grant made without reservations changes
  // only the rings above, whatever the configuration says now.
  for (const [generalKey, a] of claims.split ?? []) {
    const window = plan.reserved.get(generalKey);
    if (!window) continue;
    const fromShared = Math.min(count, claims.count - a);
    take(window.shared, fromShared);
    const own = claims.consumer
      ? [...window.reserved].find(([name]) => consumerTag(name) === claims.consumer)?.[1]
      : undefined;
    if (own) take(own, Math.min(count - fromShared, a));
  }
  return { returned };
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

/**
 * A learned class's ring that a report has just taught (not yet in the item) starts with what the vendor said
 * was used of it: `limit - remaining`. So the grants of before the learning count in every span of the new ring,
 * not only in the vendor cap's until its reset.
 *
 * And with the class's grants still in flight when the vendor answered: decided before this report reached the
 * item (on a view without this ring, so not recorded in it) and sent after that answer (so not in its count).
 * Such a grant was made at most a margin before the answer (a permit reaches the vendor within the margin) and
 * the answer is reported within about as long again, so it lies in the last two margins: the class's other
 * rings hold every grant of the class (rule 1 of docs/class-limits.md, "Processes that disagree"), and what they
 * hold there is added (a slot partly in that time counts in full: more, never fewer), less one: the grant of
 * the answer reported is among them, and the vendor counted it. Without them the ring
 * counted fewer than the vendor by the grants in flight, and once the vendor cap of the report ended (its reset)
 * the ledger granted that many more than the vendor had room for: a vendor 429 after learning, with the learned
 * limit right (issue 24).
 *
 * WHEN they were granted (seedTimes): each no earlier than it can have been, so that it leaves the new ring no
 * sooner than it leaves the vendor's window. Before, all were put at g: a minute's limit learned 23 s into its
 * window held the 22 requests of those 23 s for a whole minute from then, the class idle 23 s longer than the
 * vendor asked, once per learning (issue 24's classes soak: 71 % of the quota used).
 * Returns whether it recorded any.
 */
export function seedLearnedRing(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  cls: string,
  windowSeconds: number,
  counted: number,
  taught: readonly TaughtLimit[] = [],
): boolean {
  if (!plan.learned.has(cls)) return false;
  // The ring of the window the report implies (one per window, rule M1: its limit may be another one's of that
  // window, tighter).
  const spec = plan.classes.get(cls)?.find((candidate) => candidate.windowMs === windowSeconds * 1000);
  if (!spec || state.rings.has(spec.key)) return false;
  const recent = Math.max(
    0,
    ...[...state.rings].map(([key, ring]) => {
      const { scope, slotMs } = parseRingKey(key);
      return scope === cls ? usedAfter({ slotMs } as RingSpec, ring, g, g - 2 * plan.marginMs) : 0;
    }),
  );
  // Less the grant whose answer this is: the vendor counted it.
  const inFlight = Math.max(0, recent - 1);
  const used = Math.min(spec.limit, Math.max(0, counted) + inFlight);
  if (used === 0) return false;
  const ring = emptyRing();
  for (const [at, k] of seedTimes(state, plan, g, cls, spec, used, taught))
    recordAt(ring, spec.slotMs, g, at, k);
  state.rings.set(spec.key, ring);
  boundClassRings(state, plan, cls);
  return true;
}

/** A learned limit of a class and since when it has held (learned-limits.ts LearnedLimit). */
export interface TaughtLimit {
  limit: number;
  windowSeconds: number;
  learnedAt: number;
}

/**
 * When the `used` grants of a new ring of class `cls` were made, each as late as it can have been: [time, count]
 * pairs. Known from the class's shorter ring (the longest one shorter than the new one, `known`): the grants it
 * holds, at their slots' ends. The rest were made before its span, and its limit held them since it was learned
 * (plus two margins for processes still on the older view: the same bound as the grants in flight above): at most
 * `known.limit` in the part of each span before that is after that, so the latest they can be is `known.limit` at
 * the end of each span back, as long as the span ends after it; what is left, where the known history ends. With no shorter ring
 * learned (the class's first limit), all at g, as before. Never earlier than the new window (the vendor counts
 * them now, so they are in it).
 *
 * This is the ledger's own history: requests made without a permit (outside the broker) may be later than it
 * says, as they may be for every limit, and the vendor's headers cap them (vendor-caps.ts) as for every limit.
 */
function seedTimes(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  cls: string,
  spec: RingSpec,
  used: number,
  taught: readonly TaughtLimit[],
): [number, number][] {
  const known = (plan.classes.get(cls) ?? [])
    .filter((s) => s.spanMs < spec.spanMs && state.rings.has(s.key))
    .map((s) => ({
      s,
      since: taught.find((t) => t.limit === s.limit && t.windowSeconds * 1000 === s.windowMs)?.learnedAt,
    }))
    .filter((k): k is { s: RingSpec; since: number } => k.since !== undefined)
    .sort((a, b) => b.s.spanMs - a.s.spanMs)[0];
  if (!known) return [[g, used]];
  const { s, since } = known;
  const ring = ringOf(state, s);
  const head = slotIndex(g, s.slotMs);
  const times: [number, number][] = [];
  let left = used;
  ring.counts.forEach((count, j) => {
    const end = slotEnd(head - j, ring.subs[j] ?? SUB_SLOTS - 1, s.slotMs);
    if (count > 0 && left > 0 && end > g - s.spanMs) {
      times.push([Math.min(end - 1, g), Math.min(count, left)]);
      left -= Math.min(count, left);
    }
  });
  // Each span (end - s.spanMs, end] back from the known history held at most s.limit of them in its part after
  // heldFrom: so the s.limit latest are no later than `end`, and the rest no later than its start or heldFrom.
  const oldest = g - spec.windowMs;
  const heldFrom = since + 2 * plan.marginMs;
  let end = g - s.spanMs;
  while (left > 0 && end > heldFrom && end > oldest) {
    times.push([end, Math.min(s.limit, left)]);
    left -= Math.min(s.limit, left);
    end -= s.spanMs;
  }
  if (left > 0) times.push([Math.max(oldest, Math.min(g - s.spanMs, Math.max(end, heldFrom))), left]);
  return times;
}
