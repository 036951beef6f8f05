import { type Budget, type shareTargets, splitBudget } from '../shared/regions/lease.js';

/**
 * Targets as fractions of the limit, with hysteresis: the alternative to shareTargets' targets on top of use that
 * docs/multi-region.md compares (the bench's "targets as fractions of the limit" row), and that the two-Region
 * property draws beside it (the bound holds whatever the targets: the other's claim caps every share). Not a
 * renewer's rule: until issue 34 it was shareTargets' path without `used`, which no renewer took.
 *
 * Each Region's target is its part of the whole limit by demand (splitBudget, with the floor). A share that flaps
 * strands budget here (a lowered share frees nothing until the grants made under it leave the span), so targets
 * move only when one moves by at least HYSTERESIS of the limit, or a Region's demand appears from nothing; with no
 * demand anywhere the previous targets stand.
 */
const HYSTERESIS = 0.1;

type Targets = ReturnType<typeof shareTargets>;

/** planRenewal's `targets` rule for a renewer that keeps `previous` (the targets of its last renewal). */
export const fractionTargets =
  (previous: Targets | undefined): typeof shareTargets =>
  (demands, budgets, floor) => {
    const regions = Object.keys(demands).sort();
    const targets: Targets = Object.fromEntries(regions.map((r) => [r, {}]));
    for (const budget of budgets) {
      const fresh = splitBudget(regions, demands, budget.limit, floor);
      const kept = keepPrevious(regions, demands, budget, fresh, previous);
      for (const region of regions)
        (targets[region] as Record<string, number>)[budget.key] = kept[region] ?? 0;
    }
    return targets;
  };

function keepPrevious(
  regions: readonly string[],
  demands: Record<string, number>,
  budget: Pick<Budget, 'key' | 'limit'>,
  fresh: Record<string, number>,
  previous: Targets | undefined,
): Record<string, number> {
  if (!previous) return fresh;
  const before = regions.map((r) => previous[r]?.[budget.key]);
  if (before.some((x) => x === undefined) || before.reduce((a = 0, b = 0) => a + b, 0) !== budget.limit)
    return fresh;
  const noDemand = regions.every((r) => (demands[r] ?? 0) <= 0);
  if (noDemand) return Object.fromEntries(regions.map((r, i) => [r, before[i] ?? 0]));
  const threshold = Math.max(1, Math.ceil(HYSTERESIS * budget.limit));
  const moved = regions.some((r, i) => {
    const was = before[i] ?? 0;
    const now = fresh[r] ?? 0;
    return Math.abs(now - was) >= threshold || (was === 0 && now > 0);
  });
  return moved ? fresh : Object.fromEntries(regions.map((r, i) => [r, before[i] ?? 0]));
}
