import type { LedgerState, VendorCap } from './ledger-state.js';
import { GENERAL_SCOPE, type LimitPlan, MAX_CAPS, type RingSpec } from './limit-plan.js';
import { emptyRing, usedAfter, usedAt } from './ring.js';

export interface VendorFeedback {
  retryAfterSeconds?: number;
  limit?: number;
  remaining?: number;
  /** Unix seconds. */
  reset?: number;
}

/**
 * Vendor feedback may only make the ledger more careful: a 429's Retry-After becomes a cooldown for every
 * consumer of the token; X-RateLimit-Remaining/-Reset become a cap "at most `remaining` more until `reset`",
 * stored only when it is tighter than what the ledger already enforces for that window. Times count from `at`,
 * when the report arrived, not from the ledger time of the write, so applying a report twice (a retry) gives
 * the same state. No report reaches further than the longest window plus the margin (`plan.maxSpanMs`): no
 * vendor limit can need a longer pause, and one consumer must not be able to stop a set for longer.
 * Returns whether the state changed.
 */
export function applyVendorFeedback(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  at: number,
  feedback: VendorFeedback,
): boolean {
  let changed = false;
  if (feedback.retryAfterSeconds !== undefined) {
    const until = at + Math.min(Math.ceil(feedback.retryAfterSeconds * 1000), plan.maxSpanMs);
    if (until > g && until > state.cooldownUntil) {
      state.cooldownUntil = until;
      changed = true;
    }
  }
  if (feedback.remaining !== undefined) changed = addCap(state, plan, g, at, feedback) || changed;
  return changed;
}

function addCap(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  at: number,
  feedback: VendorFeedback,
): boolean {
  const remaining = feedback.remaining ?? 0;
  const { scope, spec } = matchLimit(state, plan, g, feedback.limit);
  const reported = feedback.reset !== undefined ? feedback.reset * 1000 : at + spec.windowMs;
  // No vendor window outlasts the longest configured one; a later reset is not credible.
  const until = Math.min(reported, at + plan.maxSpanMs);
  if (until <= g) return false;
  // What the ledger already allows in [g, until] in the window the vendor reported on: if the cap allows as
  // much, it adds nothing. (Only that window: the hour's count matters even while the minute's is lower.)
  const allowance =
    spec.limit - usedAfter(spec, state.rings.get(spec.key) ?? emptyRing(), g, until - spec.spanMs);
  if (remaining >= allowance) return false;
  const sameScope = state.caps.filter((cap) => cap.scope === scope);
  if (sameScope.some((cap) => cap.remaining <= remaining && cap.until >= until)) return false;
  const cap: VendorCap = { scope, remaining, until };
  if (state.caps.length < MAX_CAPS || sameScope.length === 0) {
    state.caps.push(cap);
    return true;
  }
  // Merging keeps the smaller allowance for the longer time: tighter than both.
  const into = sameScope.reduce((a, b) => (b.until > a.until ? b : a));
  into.remaining = Math.min(into.remaining, remaining);
  into.until = Math.max(into.until, until);
  return true;
}

/**
 * The configured limit the vendor reported on: a general one with that limit, else a class's, else (like the
 * vendor's headers) the general limit with the least room left now.
 */
function matchLimit(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  limit: number | undefined,
): { scope: string; spec: RingSpec } {
  const general = limit === undefined ? undefined : plan.general.find((spec) => spec.limit === limit);
  if (general) return { scope: GENERAL_SCOPE, spec: general };
  for (const [name, specs] of plan.classes) {
    const spec = specs.find((candidate) => candidate.limit === limit);
    if (spec) return { scope: name, spec };
  }
  const room = (spec: RingSpec) => spec.limit - usedAt(spec, state.rings.get(spec.key) ?? emptyRing(), g);
  const tightest = plan.general.reduce((a, b) =>
    room(b) < room(a) || (room(b) === room(a) && b.windowMs < a.windowMs) ? b : a,
  );
  return { scope: GENERAL_SCOPE, spec: tightest };
}
