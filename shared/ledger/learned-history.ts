import type { LedgerState } from './ledger-state.js';
import { slotEnd, slotIndex } from './ring.js';
import { parseRingKey, SUB_SLOTS } from './ring-plan.js';

/**
 * What the ledger item's own history tells the learning rules (docs/class-limits.md, I2, I3, R3 and R4), no I/O. The
 * state is at ledger time `g` (ledger-state.ts stateAt): each ring's first slot is the slot of `g`.
 */

/** The keys of the rings in `state` that count grants of `scope` (a class, or '*' for the general ones). */
export const ringKeysOf = (state: LedgerState, scope: string): string[] =>
  [...state.rings.keys()].filter((key) => parseRingKey(key).scope === scope);

/**
 * I3 (b): the latest time the oldest of the `n` most recent requests these rings count can have been sent: in
 * each ring, the end of the slot where the count from the newest reaches `n`, plus the permit validity (a permit
 * is sent within it); the earliest over the rings (each is an upper bound; a ring that counts more than the
 * vendor's limit does, like a general ring for a class limit, only gives a later one). Undefined when no ring
 * holds `n`: how far back its history goes is not known (a ring may be younger than its span). It is the
 * ledger's own history: requests sent without a permit make it older than the vendor's, so what it adds to a
 * window is never kept on its own (learned-evidence.ts, keptWindowSeconds).
 */
export function oldestSentBy(
  state: LedgerState,
  keys: readonly string[],
  g: number,
  n: number,
  validityMs: number,
): number | undefined {
  let best: number | undefined;
  for (const key of keys) {
    const ring = state.rings.get(key);
    if (!ring) continue;
    const { slotMs } = parseRingKey(key);
    const head = slotIndex(g, slotMs);
    let sum = 0;
    for (let j = 0; j < ring.counts.length; j++) {
      sum += ring.counts[j] ?? 0;
      if (sum < n) continue;
      const sent = Math.min(g, slotEnd(head - j, ring.subs[j] ?? SUB_SLOTS - 1, slotMs) + validityMs);
      best = best === undefined ? sent : Math.min(best, sent);
      break;
    }
  }
  return best;
}

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
