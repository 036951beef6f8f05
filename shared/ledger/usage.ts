import { ALL_CLASSES, type LedgerState, leftAt, remainingAt } from './ledger-state.js';
import { emptyRing, usedAt } from './ring.js';
import type { LimitPlan, RingSpec } from './ring-plan.js';
import type { LedgerUsage, PartUsage, WindowRemaining, WindowUsage } from './types.js';

/** A reservation's or the shared part's ring at g: granted from it in its span, and what it could still give. */
const partAt = (state: LedgerState, spec: RingSpec, g: number): PartUsage => ({
  limit: spec.limit,
  used: usedAt(spec, state.rings.get(spec.key) ?? emptyRing(), g),
  remaining: leftAt(state, spec, g, undefined),
});

/**
 * The usage of every limit (general, then each class) at ledger time g, on a state already moved to g
 * (`stateAt`). `remaining` is what could be granted now (0 during a cooldown, lowered by vendor caps); `used`
 * is what was granted, which a cooldown does not change. A general window with reservations also says how
 * much of each reservation and of the shared part was used and is left (by the same rules); the others are
 * as they were before reservations existed.
 */
export function usageAt(state: LedgerState, plan: LimitPlan, g: number): LedgerUsage {
  const specs = [...plan.general, ...[...plan.classes.values()].flat()];
  // remainingAt lists the limits in the same order (general, then classes in plan order).
  const remaining = remainingAt(state, plan, g, ALL_CLASSES);
  const windows = specs.map((spec, index): WindowUsage => {
    const window: WindowUsage = {
      ...(remaining[index] as WindowRemaining),
      used: usedAt(spec, state.rings.get(spec.key) ?? emptyRing(), g),
    };
    const reserved = plan.reserved.get(spec.key);
    if (!reserved) return window;
    return {
      ...window,
      shared: partAt(state, reserved.shared, g),
      reservations: [...reserved.reserved].map(([consumer, ring]) => ({
        consumer,
        ...partAt(state, ring, g),
      })),
    };
  });
  return state.cooldownUntil > g ? { windows, cooldownUntil: state.cooldownUntil } : { windows };
}
