import type { LedgerState } from '../ledger-state.js';
import { type Ring, slotIndex, usedAt } from '../ring.js';
import { allRings, type LimitPlan, parseRingKey } from '../ring-plan.js';

/**
 * The cheap path for concurrent grants. When a batch only grants, in the same head slot (of every ring) as the
 * last full write, with no vendor cap in force, its whole effect is "add d to the head slot of these rings".
 * That can be written as an addition guarded per ring by "the head holds at most `max` now", where `max` leaves
 * room for d beside the older slots, plus "no full write happened since" (the item's version). Grants of other
 * processes in the same slot then add up instead of conflicting (DynamoDB ADD commutes: counts add, the
 * sub-slots of the latest grants join a set), and the bound still holds: the older slots cannot change without
 * a new version, and the guard counts every grant already in the head.
 */
export interface HeadAddition {
  key: string;
  add: number;
  /** The head may hold at most this before the addition. */
  max: number;
  /** The latest sub-slot of the head's grants after the batch (added to the head's set of sub-slots). */
  sub: number;
}

const head = (ring: Ring | undefined) => ({ count: ring?.counts[0] ?? 0, sub: ring?.subs[0] ?? -1 });

/** The head additions equivalent to going from `read` to `work` at time g, or undefined if a full write is needed. */
export function headAdditions(
  read: LedgerState,
  work: LedgerState,
  plans: readonly LimitPlan[],
  g: number,
): HeadAddition[] | undefined {
  if (
    read.version === 0 ||
    work.caps.length > 0 ||
    work.cooldownUntil !== read.cooldownUntil ||
    work.learnedVersion !== read.learnedVersion
  )
    return undefined;
  // A change of reservations is written in full, and so is every grant while it still guards the general rings.
  const guardMs = Math.max(...plans.map((plan) => plan.retainMs));
  if (
    work.reservationsKey !== read.reservationsKey ||
    work.reservationsChangedAt !== read.reservationsChangedAt ||
    g < read.reservationsChangedAt + guardMs
  )
    return undefined;
  const keys = new Set([...read.rings.keys(), ...work.rings.keys()]);
  for (const key of keys) {
    const { slotMs } = parseRingKey(key);
    if (slotIndex(g, slotMs) !== slotIndex(read.time, slotMs)) return undefined;
  }
  const additions: HeadAddition[] = [];
  for (const key of keys) {
    const before = read.rings.get(key);
    const after = work.rings.get(key);
    const older = (ring: Ring | undefined) =>
      (ring?.counts ?? [])
        .slice(1)
        .join(',')
        .replace(/(^|,)[0,]*$/, '');
    if (older(before) !== older(after)) return undefined;
    const add = head(after).count - head(before).count;
    if (add < 0) return undefined;
    if (add === 0) continue;
    const olderOnly: Ring = {
      counts: [0, ...(after?.counts ?? []).slice(1)],
      subs: [0, ...(after?.subs ?? []).slice(1)],
    };
    // The general ring of a window with reservations is not a bound (its shared and reservation rings are,
    // each with its own condition): only that it is known; except under a Region's share (region-share.ts).
    const bounds = plans.flatMap((plan) =>
      allRings(plan)
        .filter((spec) => spec.key === key)
        .map((spec) =>
          plan.reserved.has(spec.key) && plan.checkReserved !== true
            ? Number.MAX_SAFE_INTEGER
            : spec.limit - usedAt(spec, olderOnly, g) - add,
        ),
    );
    const max = Math.min(...bounds);
    // A ring no plan of the batch knows cannot have grown; and a grant that fit leaves max ≥ head before.
    if (!Number.isFinite(max) || max < head(before).count) return undefined;
    additions.push({ key, add, max, sub: head(after).sub });
  }
  return additions.length > 0 ? additions : undefined;
}
