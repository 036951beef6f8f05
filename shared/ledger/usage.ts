import { ALL_CLASSES, type LedgerState, remainingAt } from './ledger-state.js';
import type { LimitPlan } from './limit-plan.js';
import { emptyRing, usedAt } from './ring.js';
import type { LedgerUsage, WindowRemaining } from './types.js';

/**
 * The usage of every limit (general, then each class) at ledger time g, on a state already moved to g
 * (`stateAt`). `remaining` is what could be granted now (0 during a cooldown, lowered by vendor caps); `used`
 * is what was granted, which a cooldown does not change.
 */
export function usageAt(state: LedgerState, plan: LimitPlan, g: number): LedgerUsage {
  const specs = [...plan.general, ...[...plan.classes.values()].flat()];
  // remainingAt lists the limits in the same order (general, then classes in plan order).
  const remaining = remainingAt(state, plan, g, ALL_CLASSES);
  const windows = specs.map((spec, index) => ({
    ...(remaining[index] as WindowRemaining),
    used: usedAt(spec, state.rings.get(spec.key) ?? emptyRing(), g),
  }));
  return state.cooldownUntil > g ? { windows, cooldownUntil: state.cooldownUntil } : { windows };
}
