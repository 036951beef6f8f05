import { type LedgerState, leftAt } from './ledger-state.js';
import { GENERAL_SCOPE, type LimitPlan, ringsFor } from './ring-plan.js';

/**
 * The most one grant of `cls` could give `consumer` (its configured name if it holds a reservation) at g: the
 * smallest of what is left of each limit that applies, where a window with reservations holds for it only the
 * shared part's room plus its own reservation's room (ReservedWindow: a grant is checked against those, not the
 * general ring, whose `remaining` also counts the other consumers' reservations). 0 during a cooldown, lowered
 * by vendor caps (leftAt). A consumer sizes its next ask by it: a larger one is denied whole.
 */
export function availableTo(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  cls: string | undefined,
  consumer: string | undefined,
): number {
  return Math.min(
    ...ringsFor(plan, cls).map((spec) => {
      const left = leftAt(state, spec, g, spec.scope === GENERAL_SCOPE ? undefined : spec.scope);
      const window = plan.reserved.get(spec.key);
      if (!window) return left;
      const own = consumer === undefined ? undefined : window.reserved.get(consumer);
      const parts = leftAt(state, window.shared, g, undefined) + (own ? leftAt(state, own, g, undefined) : 0);
      // The general ring as well: for a span after the reservations changed, grants are checked against it too.
      return Math.min(left, parts);
    }),
  );
}
