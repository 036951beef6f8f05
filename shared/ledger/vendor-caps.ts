import { GENERAL_SCOPE, type LimitPlan, type RingSpec } from './ring-plan.js';

/**
 * Vendor caps, one per limit. The vendor's X-RateLimit-* headers speak of one of its limits at a time: "of this
 * limit, `remaining` left until `reset`". Each report is kept as a cap on the configured limit it names (a
 * general one, else a class's), and on nothing longer: its end is at most that limit's window plus the margin
 * away, and it never joins another limit's cap (before, a fifth cap was merged into the longest-lived one, so a
 * minute's "3 left, resets in 30 s" held the set to 3 permits for the rest of the hour). A limit the settings do
 * not know (or a report naming none) is taken as the shortest general window: its window is unknown, and that is
 * all a report about an unknown window warrants (the vendor's headers carry no window length).
 *
 * A second report on the same limit is put together with the first: the fewer remaining until the later end.
 * That is the tighter one when one is tighter (an honest vendor's reports on one window share its reset and
 * count down; the client reports only fewer than the ledger said), and tighter than both when they disagree
 * (a liar, or a sliding window): keeping only one would let the other's grants through, and both ends are within
 * what that limit warrants. So there are at most as many caps as limits, each holding grants at most its own
 * limit's window plus the margin after the report that made it.
 *
 * Every cap holds every grant of its scope (the vendor answers 429 whichever of its limits is out); which limit
 * it is about decides only which report it is put together with, and how far it may reach.
 */

/**
 * "From now until `until`, at most `remaining` more grants (of `scope`)": from the vendor's headers about one of
 * its limits. It holds every grant of its scope (like the vendor, which answers 429 whichever limit is out), and
 * there is at most one per limit (below).
 */
export interface VendorCap {
  scope: string;
  remaining: number;
  until: number;
  /** The window of the limit of `scope` it is about; absent when not known (written by an older release). */
  windowMs?: number;
}

/** What the caps are kept in: a ledger state (ledger-state.ts), which imports this module for its caps. */
export interface HoldsCaps {
  caps: VendorCap[];
}

/** The configured limits of a scope: the general ones, or a class's (none for a class no longer configured). */
const limitsOf = (plan: LimitPlan, scope: string): readonly RingSpec[] =>
  scope === GENERAL_SCOPE ? plan.general : (plan.classes.get(scope) ?? []);

/** The shortest general window: what a report about a limit the settings do not know is taken as. */
export const shortestGeneral = (plan: LimitPlan): RingSpec =>
  plan.general.reduce((a, b) => (b.spanMs < a.spanMs ? b : a));

/**
 * The configured limit a report names by its X-RateLimit-Limit: a general one with that limit, else a class's;
 * `known` false when there is none (or no limit was named): then the shortest general window. A class report
 * (`cls`) names its ring of the window its report implies (`classWindowMs`, a learned class) first, else its
 * class's limit of that size; failing both, and unless the limit is a general one's, its class's
 * shortest ring, unknown: a class answer's headers are the class's (H1, docs/class-limits.md), so what it says
 * never holds the general limits.
 */
export function limitNamed(
  plan: LimitPlan,
  limit: number | undefined,
  cls?: string,
  classWindowMs?: number,
): { spec: RingSpec; known: boolean } {
  const own = cls === undefined ? [] : (plan.classes.get(cls) ?? []);
  if (limit !== undefined) {
    // The ring of the window the report implies first: another window's ring of the same limit (a shorter one
    // learned early, or the probe's) would end the vendor's "none left until the reset" at its own span.
    const named =
      (classWindowMs === undefined ? undefined : own.find((s) => s.windowMs === classWindowMs)) ??
      own.find((s) => s.limit === limit);
    if (named) return { spec: named, known: true };
    const general = plan.general.find((spec) => spec.limit === limit);
    if (general) return { spec: general, known: true };
    if (own.length > 0) return { spec: own.reduce((a, b) => (b.spanMs < a.spanMs ? b : a)), known: false };
    for (const specs of plan.classes.values()) {
      const spec = specs.find((candidate) => candidate.limit === limit);
      if (spec) return { spec, known: true };
    }
  }
  return { spec: shortestGeneral(plan), known: false };
}

/**
 * Puts `cap` in its limit's place: alone, or together with the cap already there (the fewer remaining until the
 * later end). Returns whether anything changed.
 */
export function placeCap(state: HoldsCaps, cap: VendorCap & { windowMs: number }): boolean {
  const held = state.caps.find((c) => c.scope === cap.scope && c.windowMs === cap.windowMs);
  if (!held) {
    state.caps.push(cap);
    return true;
  }
  if (held.remaining <= cap.remaining && held.until >= cap.until) return false;
  held.remaining = Math.min(held.remaining, cap.remaining);
  held.until = Math.max(held.until, cap.until);
  return true;
}

const isPlaced = (plan: LimitPlan, cap: VendorCap): boolean =>
  limitsOf(plan, cap.scope).length === 0 ||
  limitsOf(plan, cap.scope).some((spec) => spec.windowMs === cap.windowMs);

/**
 * Gives every cap whose limit is not known its limit, putting together caps that land on one: afterwards there is
 * at most one cap per configured limit. A cap's limit is unknown when an older release wrote the caps since (it
 * keeps no windows: state-codec.ts) or the settings no longer have that window. It is taken to be the shortest
 * limit of its scope whose window plus margin reaches its end (no cap of ours reaches further than its limit's),
 * else the longest. Never looser: caps put together hold at least what each held. A cap of a class no longer
 * configured holds nobody's grants and is left until it ends.
 */
export function normalizeCaps(state: HoldsCaps, plan: LimitPlan, g: number): void {
  if (state.caps.every((cap) => isPlaced(plan, cap))) return;
  const caps = state.caps;
  state.caps = [];
  for (const cap of caps) {
    const specs = limitsOf(plan, cap.scope);
    if (specs.length === 0) {
      state.caps.push(cap);
      continue;
    }
    const byReach = [...specs].sort((a, b) => a.spanMs - b.spanMs);
    const spec = isPlaced(plan, cap)
      ? undefined
      : (byReach.find((candidate) => g + candidate.spanMs >= cap.until) ?? byReach.at(-1));
    placeCap(state, { ...cap, windowMs: spec?.windowMs ?? (cap.windowMs as number) });
  }
}
