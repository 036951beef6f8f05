import type { LedgerState } from './ledger-state.js';
import { parseRingKey, SUB_SLOTS } from './limit-plan.js';
import { slotEnd, slotIndex } from './ring.js';

/**
 * What the ledger item's own history tells the rise rules (docs/class-limits.md, R3 and R4), no I/O. The
 * state is at ledger time `g` (ledger-state.ts stateAt): each ring's first slot is the slot of `g`.
 */

/** The keys of the rings in `state` that count grants of `scope` (a class, or '*' for the general ones). */
export const ringKeysOf = (state: LedgerState, scope: string): string[] =>
  [...state.rings.keys()].filter((key) => parseRingKey(key).scope === scope);

/** At most how many grants the ring `key` holds after `after`: every slot that may hold one (an upper bound). */
export function grantsAfter(state: LedgerState, key: string, g: number, after: number): number {
  const ring = state.rings.get(key);
  if (!ring) return 0;
  const { slotMs } = parseRingKey(key);
  const head = slotIndex(g, slotMs);
  let sum = 0;
  ring.counts.forEach((count, j) => {
    if (count > 0 && slotEnd(head - j, ring.subs[j] ?? SUB_SLOTS - 1, slotMs) > after) sum += count;
  });
  return sum;
}
