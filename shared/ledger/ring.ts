import { type RingSpec, SUB_SLOTS } from './ring-plan.js';

/**
 * A ring of slot counters, newest first: index j is the slot `head - j`, where head = floor(time / slotMs).
 * `subs[j]` is the sub-slot (0..SUB_SLOTS-1) of the latest grant in that slot: every grant of the slot happened
 * before `slotEnd`, which is what lets the slot stop counting soon after its last grant leaves the span.
 */
export interface Ring {
  counts: number[];
  subs: number[];
}

export const emptyRing = (): Ring => ({ counts: [], subs: [] });

export const slotIndex = (time: number, slotMs: number): number => Math.floor(time / slotMs);

/** An upper bound (exclusive) on the time of every grant recorded in slot `index` with sub-slot `sub`. */
export const slotEnd = (index: number, sub: number, slotMs: number): number =>
  index * slotMs + Math.ceil(((sub + 1) * slotMs) / SUB_SLOTS);

export const subSlot = (time: number, slotMs: number): number =>
  Math.min(SUB_SLOTS - 1, Math.floor(((time - slotIndex(time, slotMs) * slotMs) * SUB_SLOTS) / slotMs));

/** Moves the ring's head from `fromTime` to `toTime` (later), keeping at most `length` slots. */
export function shiftRing(
  ring: Ring,
  slotMs: number,
  fromTime: number,
  toTime: number,
  length: number,
): Ring {
  const by = slotIndex(toTime, slotMs) - slotIndex(fromTime, slotMs);
  if (by >= length) return emptyRing();
  const pad = new Array<number>(by).fill(0);
  return trimRing({
    counts: [...pad, ...ring.counts].slice(0, length),
    subs: [...pad, ...ring.subs].slice(0, length),
  });
}

/** Drops trailing empty slots (the oldest), so the stored item stays small. */
export function trimRing(ring: Ring): Ring {
  let end = ring.counts.length;
  while (end > 0 && !ring.counts[end - 1]) end--;
  return { counts: ring.counts.slice(0, end), subs: ring.subs.slice(0, end) };
}

export const isEmptyRing = (ring: Ring): boolean => ring.counts.every((count) => !count);

/**
 * Grants that count at time `g` (the ring's head is slot(g)): every slot whose grants may lie in
 * [g - span, g]. A slot that is partly out of the span counts in full, which is what makes the bound hold.
 */
export const usedAt = (spec: RingSpec, ring: Ring, g: number): number =>
  usedAfter(spec, ring, g, g - spec.spanMs);

/** Grants recorded in slots that may hold a grant at or after `after` (the ring's head is slot(headTime)). */
export function usedAfter(spec: RingSpec, ring: Ring, headTime: number, after: number): number {
  const head = slotIndex(headTime, spec.slotMs);
  let used = 0;
  ring.counts.forEach((count, j) => {
    if (count > 0 && slotEnd(head - j, ring.subs[j] ?? SUB_SLOTS - 1, spec.slotMs) > after) used += count;
  });
  return used;
}

/** The earliest time ≥ g at which `k` more fit, if nothing else is granted meanwhile. */
export function earliestFit(spec: RingSpec, ring: Ring, g: number, k: number): number {
  let excess = usedAt(spec, ring, g) + k - spec.limit;
  if (excess <= 0) return g;
  const head = slotIndex(g, spec.slotMs);
  for (let j = ring.counts.length - 1; j >= 0; j--) {
    const count = ring.counts[j] ?? 0;
    const end = slotEnd(head - j, ring.subs[j] ?? SUB_SLOTS - 1, spec.slotMs);
    if (count === 0 || end <= g - spec.spanMs) continue;
    excess -= count;
    if (excess <= 0) return end + spec.spanMs;
  }
  // Unreachable for k ≤ limit (validated before); never a grant.
  return Number.POSITIVE_INFINITY;
}

/** Records `k` grants at time `g` (the ring's head is slot(g)). */
export function recordGrant(ring: Ring, slotMs: number, g: number, k: number): void {
  if (ring.counts.length === 0) {
    ring.counts.push(0);
    ring.subs.push(0);
  }
  ring.counts[0] = (ring.counts[0] ?? 0) + k;
  ring.subs[0] = Math.max(ring.subs[0] ?? 0, subSlot(g, slotMs));
}

/**
 * Records `k` grants at an earlier time `at` (no later than `g`, no earlier than the ring's length before it) in a
 * ring whose head is slot(g): how a new ring is seeded with grants made before it existed (ledger-state.ts).
 */
export function recordAt(ring: Ring, slotMs: number, g: number, at: number, k: number): void {
  const j = Math.max(0, slotIndex(g, slotMs) - slotIndex(Math.min(at, g), slotMs));
  while (ring.counts.length <= j) {
    ring.counts.push(0);
    ring.subs.push(0);
  }
  ring.counts[j] = (ring.counts[j] ?? 0) + k;
  ring.subs[j] = Math.max(ring.subs[j] ?? 0, subSlot(Math.min(at, g), slotMs));
}

/** Takes up to `k` back from the slot of `grantedAt` (never below zero); how many came out (0 if aged out). */
export function returnGrant(ring: Ring, slotMs: number, head: number, grantedAt: number, k: number): number {
  const j = head - slotIndex(grantedAt, slotMs);
  const count = ring.counts[j] ?? 0;
  if (j < 0 || count === 0) return 0;
  const taken = Math.min(count, k);
  ring.counts[j] = count - taken;
  return taken;
}
