import type { LedgerState } from '../ledger-state.js';
import { type AdoptionMode, adoptionOf, type RegionShare } from '../region-share.js';
import type { LimitPlan } from '../ring-plan.js';
import { ringSnapshotOf } from '../ring-snapshot.js';
import type { Applied, At, Outcome } from './outcome.js';

export interface ShareAdoptionInput {
  plan: LimitPlan;
  /** The share to adopt (checked against the plan: region-share.ts checkShare). */
  wanted: RegionShare;
  mode: AdoptionMode;
}

/**
 * Share adoption: a Region's share of the budgets, by the rule of region-share.ts adoptionOf applied to the
 * share the item holds (`replace` refused as `stale` under a newer one, `cap` lowering it); the same share again
 * changes nothing. With the item's rings at the adoption (what a lease record written next may carry).
 */
export function adoptShare(
  state: LedgerState,
  input: ShareAdoptionInput,
  { g }: At,
): Applied<Extract<Outcome, { kind: 'share' }>> {
  const adoption = adoptionOf(state.share, input.wanted, input.mode);
  if (adoption.outcome === 'adopted') state.share = adoption.share;
  return {
    change: adoption.outcome === 'adopted' ? 'other' : 'none',
    outcome: { kind: 'share', adoption, snapshot: ringSnapshotOf(state, input.plan, g) },
  };
}
