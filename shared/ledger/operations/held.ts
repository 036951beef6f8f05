import type { LedgerState } from '../ledger-state.js';
import { heldPlan, NO_SHARE } from '../region-share.js';
import type { LimitPlan } from '../ring-plan.js';

/**
 * A share a one-Region ledger (`regional` false) no longer holds: its fence passed, so no renewer keeps it (the
 * stage went back to one Region, docs/deploying.md). A regional ledger fences itself to its floor instead.
 */
export const shareLapsed = (state: LedgerState, g: number, regional: boolean): boolean =>
  !regional && state.share !== undefined && g >= state.share.fenceAt;

/** The plan `state`'s share holds grants to at g (region-share.ts); without Regions, `plan` itself. */
export function heldBy(plan: LimitPlan, state: LedgerState, g: number, regional: boolean): LimitPlan {
  if (regional) return heldPlan(plan, state.share ?? NO_SHARE, g);
  return heldPlan(plan, shareLapsed(state, g, regional) ? undefined : state.share, g);
}
