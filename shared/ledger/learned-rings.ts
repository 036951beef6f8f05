import { createHash } from 'node:crypto';
import { PROBE_LIMIT } from './learned-limits.js';
import { emptyRing, isEmptyRing, type Ring, recordAt, slotEnd, slotIndex, usedAfter } from './ring.js';
import {
  CLASS_SLOTS_PER_WINDOW,
  type LimitPlan,
  parseRingKey,
  type RingSpec,
  ringKey,
  SUB_SLOTS,
} from './ring-plan.js';

/**
 * A learned class's rings in the item (docs/class-limits.md): seeded when a report teaches a window
 * (seedLearnedRing) or when a ledger first decides on a view whose report counted the vendor's requests
 * (seedFromLearned), restored from a longer ring when a window comes back into the plan (restoreClassRings), and
 * bounded to what the item is sized for (boundClassRings). A grant of a learned class runs the last three
 * (ledger-state.ts acquire); a grant of any other class, none of them.
 */

/** What of the ledger's state (ledger-state.ts LedgerState) the learned rings read and change. */
interface RingsState {
  rings: Map<string, Ring>;
  /** The newest learned view the item's grants were decided under (LedgerState.learnedVersion). */
  learnedVersion: number;
}

/**
 * A learned class's ring its plan has and the item does not (a window whose limit was not in the plan a while: held
 * as tight by another of its limits, lapsed, or the probe's again) starts with the grants of the class's longest
 * ring of a window at least as long, each at the end of its slot there (the latest it can have been). That ring
 * counted every grant of the class in its span (rule 1 of "Processes that disagree"), a superset of this one's
 * span. Without it, a ring left out of the plan while a tighter limit held the class (a liar's 1 per minute over
 * a kept 7 per 15 s) came back empty when that limit ended, and the grants of its last window went uncounted: 8 in
 * 15 s at the vendor. A window the class never had, which no longer ring covers, is seeded at its learning
 * instead (seedLearnedRing). Returns whether it restored any (the grant then needs a full write).
 */
export function restoreClassRings(state: RingsState, plan: LimitPlan, cls: string, g: number): boolean {
  if (!plan.learned.has(cls)) return false;
  let restored = false;
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
    if (isEmptyRing(ring)) continue;
    state.rings.set(spec.key, ring);
    restored = true;
  }
  return restored;
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
 * the learned rings (docs/multi-region.md, "The first learning in two Regions"). Returns whether it changed the
 * item (a ring seeded or dropped, its learned version raised): the grant then needs a full write.
 */
export function seedFromLearned(
  state: RingsState,
  plan: LimitPlan,
  cls: string,
  g: number,
  ledgerKey: string | undefined,
): boolean {
  if (!plan.seeds || !plan.learned.has(cls)) return false;
  let seeded = false;
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
    seeded = true;
  }
  return boundClassRings(state, plan, cls) || seeded;
}

/** The ledger key a seed is of, on the learned item: 8 characters of its hash (the items' keys stay apart). */
export const seedKeyOf = (ledgerKey: string): string =>
  createHash('sha256').update(ledgerKey).digest('base64url').slice(0, 8);

/**
 * Rule M3 (docs/class-limits.md): a learned class keeps in the item at most its plan's windows (learnedWindows)
 * and the probe's ring, which is what the item is sized for. A ring of the class its plan no longer has (a lapsed
 * window) keeps counting the class's grants (rule 1 of "Processes that disagree") while there is room; past it,
 * such rings go, longest window first (a window learned again is seeded anew). Without it, a liar cycling
 * through windows grows the item past its write unit. Returns whether it dropped any.
 */
export function boundClassRings(state: RingsState, plan: LimitPlan, cls: string): boolean {
  if (!plan.learned.has(cls)) return false;
  const inPlan = new Set((plan.classes.get(cls) ?? []).map((spec) => spec.key));
  const probe = ringKey(cls, PROBE_LIMIT.windowSeconds * 1000, CLASS_SLOTS_PER_WINDOW);
  const others = [...state.rings.keys()]
    .filter((key) => key !== probe && !inPlan.has(key) && parseRingKey(key).scope === cls)
    .sort((a, b) => parseRingKey(b).windowMs - parseRingKey(a).windowMs);
  // The plan's rings (the probe's key is a learned 10 s window's too: then it counts as one of them).
  const learned = [...inPlan].filter((key) => state.rings.has(key)).length;
  const dropped = others.slice(0, Math.max(0, learned + others.length - plan.learnedWindows));
  for (const key of dropped) state.rings.delete(key);
  return dropped.length > 0;
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
  state: RingsState,
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
  state: RingsState,
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
  const ring = state.rings.get(s.key) ?? emptyRing();
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
