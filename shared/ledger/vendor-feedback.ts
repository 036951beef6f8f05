import type { LedgerState } from './ledger-state.js';
import { callerTag } from './receipts.js';
import { emptyRing, recordAt, usedAfter } from './ring.js';
import { GENERAL_SCOPE, type LimitPlan, type RingSpec } from './ring-plan.js';
import { limitNamed, normalizeCaps, placeCap, shortestGeneral, type VendorCap } from './vendor-caps.js';

export interface VendorFeedback {
  retryAfterSeconds?: number;
  limit?: number;
  remaining?: number;
  /** Unix seconds, on the vendor's clock (as reported). */
  reset?: number;
  /**
   * The reset in ledger time, the latest moment the vendor can mean (learned-evidence.ts resetInLedgerTime, rule
   * C1): what caps and holds use. Absent: `reset` taken as ledger time.
   */
  resetMs?: number;
  /**
   * How much later than its earliest reading the reset can mean (its whole second and the offset's width): a
   * learned class's ring has the window the earliest reading implies (learned-evidence.ts), so its cap may reach
   * this much past that ring's span.
   */
  resetWidthMs?: number;
  /** The class of the answer the headers came on: the limit they name is looked for among its limits first. */
  class?: string;
  /** The window (ms) the class report implies for the limit it names (learned-evidence.ts): its ring, if any. */
  classWindowMs?: number;
  /**
   * Ledger time until which the plan's learned rings stay as they are: the next end of a provisional limit
   * (learned-reports.ts nextPlanIn; absent: none ends). A ring that holds a cap's worth now holds it only so long.
   */
  planUntil?: number;
}

/** The reset of a report in ledger time (resetMs), or undefined. */
const resetMsOf = (feedback: VendorFeedback): number | undefined =>
  feedback.resetMs ?? (feedback.reset === undefined ? undefined : feedback.reset * 1000);

/**
 * H1 (docs/class-limits.md): a class answer's 429 holds the general limits only when its headers name a general
 * limit with nothing left; else it holds its class alone.
 */
export const holdsGeneral = (plan: LimitPlan, feedback: VendorFeedback): boolean =>
  feedback.class === undefined ||
  (feedback.remaining === 0 &&
    limitNamed(plan, feedback.limit).spec.scope === GENERAL_SCOPE &&
    limitNamed(plan, feedback.limit).known);

/**
 * Vendor feedback may only make the ledger more careful, and one caller's word holds the set no longer than the
 * limit it names warrants.
 *
 * X-RateLimit-Remaining/-Reset become a cap "at most `remaining` more until `reset`" on the limit named
 * (vendor-caps.ts), stored only when it is tighter than what the ledger already enforces there.
 *
 * A 429's Retry-After becomes a cooldown for every consumer of the token, reserved ones included, as far as the
 * report warrants: the shortest general window plus the margin (no minute's burst needs longer), or up to the
 * reset of a general limit its own headers show exhausted (X-RateLimit-Limit of that limit, Remaining 0), at most
 * that limit's window plus the margin. Beyond that a Retry-After is a claim: the furthest one is kept with its
 * caller's tag (`cooldownClaim`), and when a different caller claims too, the set is held as far as both claim
 * (the nearer of the two). So one consumer, mistaken or lying, holds the set a minute at most; an hour needs the
 * hour's own headers or a second caller. Nothing reaches beyond the longest window plus the margin.
 *
 * Times count from `at`, when the report arrived, not from the ledger time of the write, so applying a report twice
 * (a retry) gives the same state. `reporter`: callerTag of the reporting caller. Returns whether the state changed.
 */
export function applyVendorFeedback(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  at: number,
  feedback: VendorFeedback,
  reporter: string = callerTag(''),
): boolean {
  normalizeCaps(state, plan, g);
  let changed = false;
  if (feedback.retryAfterSeconds !== undefined)
    changed = holdsGeneral(plan, feedback)
      ? applyRetryAfter(state, plan, g, at, feedback.retryAfterSeconds, feedback, reporter)
      : holdClass(state, plan, g, at, feedback.retryAfterSeconds, feedback);
  if (feedback.remaining !== undefined) changed = addCap(state, plan, g, at, feedback) || changed;
  return changed;
}

/**
 * How long after `at` one report's Retry-After may hold the set on its own word: the shortest general window plus
 * the margin, or, when its headers show a general limit exhausted, until that limit's reset (at most its window
 * plus the margin).
 */
export function warrantedHoldMs(plan: LimitPlan, at: number, feedback: VendorFeedback): number {
  const warrant = shortestGeneral(plan).spanMs;
  const { spec, known } = limitNamed(plan, feedback.limit);
  const resetMs = resetMsOf(feedback);
  if (!known || spec.scope !== GENERAL_SCOPE || feedback.remaining !== 0 || resetMs === undefined)
    return warrant;
  return Math.max(warrant, Math.min(resetMs - at, spec.spanMs));
}

/**
 * H1: a class's 429 holds that class alone: a cap of nothing more of it (vendor-caps.ts) for its Retry-After, as
 * far as the limit it names warrants (its window and the margin; a limit the plan does not know: the shortest
 * general window, as a bare Retry-After, and no further than the reset its headers name). Its headers' own cap (addCap) holds the rest of the window as for any
 * report.
 */
function holdClass(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  at: number,
  retryAfterSeconds: number,
  feedback: VendorFeedback,
): boolean {
  const { spec, known } = limitNamed(plan, feedback.limit, feedback.class, feedback.classWindowMs);
  if (spec.scope === GENERAL_SCOPE) return false;
  // A limit the plan does not know: at most what a bare Retry-After warrants, and no longer than the window its
  // headers name (their reset, and the margin).
  const resetMs = resetMsOf(feedback);
  const warrant = known
    ? spec.spanMs
    : Math.min(
        shortestGeneral(plan).spanMs,
        resetMs === undefined ? Number.POSITIVE_INFINITY : resetMs - at + plan.marginMs,
      );
  const until = at + Math.min(Math.ceil(retryAfterSeconds * 1000), warrant);
  if (until <= g) return false;
  return placeCap(state, { scope: spec.scope, remaining: 0, until, windowMs: spec.windowMs });
}

function applyRetryAfter(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  at: number,
  retryAfterSeconds: number,
  feedback: VendorFeedback,
  reporter: string,
): boolean {
  const askedMs = Math.min(Math.ceil(retryAfterSeconds * 1000), plan.maxSpanMs);
  let until = at + Math.min(askedMs, warrantedHoldMs(plan, at, feedback));
  let changed = false;
  // Kept in whole seconds (as the item stores it), never beyond what was asked.
  const claim = Math.floor((at + askedMs) / 1000) * 1000;
  if (claim > until) {
    const held = state.cooldownClaim;
    // Two different callers both ask for at least the nearer of their two claims.
    if (held && held.caller !== reporter) until = Math.max(until, Math.min(held.until, claim));
    // The furthest claim is all a later caller's report needs to find the furthest two callers agree on.
    if (claim > g && (!held || claim > held.until)) {
      state.cooldownClaim = { caller: reporter, until: claim };
      changed = true;
    }
  }
  if (until > g && until > state.cooldownUntil) {
    state.cooldownUntil = until;
    changed = true;
  }
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
  const { spec, known } = limitNamed(plan, feedback.limit, feedback.class, feedback.classWindowMs);
  const reported = resetMsOf(feedback) ?? at + spec.windowMs;
  // A limit resets at most its window (and the margin) after the report: a later reset is not credible. The ring of
  // the window this very report implies (a learned class's, a lower bound read from its reset): as late as the
  // reset may mean.
  const learnedWidth =
    spec.scope !== GENERAL_SCOPE && plan.learned.has(spec.scope) && spec.windowMs === feedback.classWindowMs
      ? (feedback.resetWidthMs ?? 0)
      : 0;
  const until = Math.min(reported, at + spec.spanMs + learnedWidth);
  if (until <= g) return false;
  // What the ledger already allows in [g, until] in the window the vendor reported on (for a limit the settings
  // do not know, in every general one): if the cap allows as much, it adds nothing.
  const checked = known
    ? [spec]
    : spec.scope === GENERAL_SCOPE
      ? plan.general
      : (plan.classes.get(spec.scope) ?? []);
  const allowance = Math.min(
    ...checked.map((s) => s.limit - usedAfter(s, state.rings.get(s.key) ?? emptyRing(), g, until - s.spanMs)),
  );
  // Only while those rings hold: a learned class's ring of a provisional limit that ends before the cap does
  // leaves the rest of the vendor's window to the cap alone (its class's other rings may let more through then).
  const lasting = !plan.learned.has(spec.scope) || (feedback.planUntil ?? Number.POSITIVE_INFINITY) >= until;
  if (lasting && remaining >= allowance) return false;
  const held = state.caps.find((c) => c.scope === spec.scope && c.windowMs === spec.windowMs);
  if (held && held.until < until && held.remaining < remaining) foldIntoRing(state, spec, g, held);
  return placeCap(state, { scope: spec.scope, remaining, until, windowMs: spec.windowMs });
}

/**
 * H3 (docs/class-limits.md): a report of the next window (a later reset, more left) would be put together with the
 * cap of the window before, spent by the grants since, as "the fewer until the later end": nothing more of the
 * scope until the new window's end, a whole window held for a count the vendor has already let go of. Instead the
 * cap before is kept by its limit's ring, which holds every grant of its scope too: as many grants recorded as
 * ending at its end (`until − span`) as make the ring allow no more than it did until then. The new cap then takes
 * the limit's place alone; both hold, as before, and neither past its own end. Where the cap before ends more than
 * a span ahead (a reset read as late as C1 reads it, within a span of a report), a ring cannot hold it there, and
 * the two are put together as before.
 */
function foldIntoRing(state: LedgerState, spec: RingSpec, g: number, held: VendorCap): void {
  const from = held.until - spec.spanMs;
  if (from > g) return;
  const ring = state.rings.get(spec.key) ?? emptyRing();
  const missing = spec.limit - Math.max(0, held.remaining) - usedAfter(spec, ring, g, from);
  if (missing > 0) {
    recordAt(ring, spec.slotMs, g, from, missing);
    state.rings.set(spec.key, ring);
  }
  state.caps = state.caps.filter((c) => c !== held);
}
