import type { LedgerState } from './ledger-state.js';
import { slotIndex } from './ring.js';
import { allRings, type LimitPlan, parseRingKey } from './ring-plan.js';

/**
 * What a regional ledger had granted per ring at ledger time `at`, slot by slot with the slots' start times: enough
 * for the other Region to know how many of these grants are still in a span ending at a later time (every grant
 * of a slot lies in [start, start + slotMs)). By ring key (limit-plan.ts, RingSpec.key). The lease module
 * (shared/regions/lease.ts) uses this very shape (issue 27's contract): keep the two identical.
 */
export interface RingSnapshot {
  at: number;
  rings: Record<string, { windowMs: number; slotMs: number; slots: { start: number; count: number }[] }>;
}

/**
 * The snapshot of a state already moved to g (ledger-state.ts, stateAt): every ring of the plan (an empty one with
 * no slots) and every other ring the item holds (another process's view of a learned class), non-empty slots only,
 * newest first.
 */
export function ringSnapshotOf(state: LedgerState, plan: LimitPlan, g: number): RingSnapshot {
  const rings: RingSnapshot['rings'] = {};
  const keys = new Set([...allRings(plan).map((spec) => spec.key), ...state.rings.keys()]);
  for (const key of keys) {
    const { windowMs, slotMs } = parseRingKey(key);
    const head = slotIndex(g, slotMs);
    const slots: { start: number; count: number }[] = [];
    (state.rings.get(key)?.counts ?? []).forEach((count, j) => {
      if (count > 0) slots.push({ start: (head - j) * slotMs, count });
    });
    rings[key] = { windowMs, slotMs, slots };
  }
  return { at: g, rings };
}
