import { seedLearnedRing, type TaughtLimit } from '../learned-rings.js';
import type { LedgerState } from '../ledger-state.js';
import type { LimitPlan } from '../ring-plan.js';

export interface LearningInput {
  plan: LimitPlan;
  /** The learned view's version the report was written at (0: none). */
  version: number;
  /** What the report taught, when it taught a limit and said what remained: the window's count seeds its ring. */
  seed?: { cls: string; windowSeconds: number; counted: number; taught: readonly TaughtLimit[] } | undefined;
}

/**
 * Learning: what a class report taught holds the item's grants from now on. A taught window's ring is seeded
 * with what the vendor counted (learned-rings.ts seedLearnedRing), and the item is stamped with the view's version,
 * so that a process on an older view reads the view again before it grants (grant's stale-view). Whether it
 * seeded a ring (the item is tighter) and whether it raised the item's version (both change the item).
 */
export function learn(
  state: LedgerState,
  input: LearningInput,
  g: number,
): { seeded: boolean; newer: boolean } {
  const { seed } = input;
  const seeded =
    seed !== undefined &&
    seedLearnedRing(state, input.plan, g, seed.cls, seed.windowSeconds, seed.counted, seed.taught);
  const newer = input.version > state.learnedVersion;
  if (newer) state.learnedVersion = input.version;
  return { seeded, newer };
}
