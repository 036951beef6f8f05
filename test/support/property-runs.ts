/**
 * A property's run count (or a run's length) in `npm test` and in `npm run test:long` (docs/testing.md): the
 * quick count keeps `npm test` within its time, the full one runs in test:long (which sets TEST_LONG=1). The
 * seed and the property stay the same: fast-check draws run i from the seed and i alone, so the quick runs are
 * the first runs of the full ones, and a failure of either replays with the seed and path fast-check prints.
 *
 * Importing this module puts the file in test:long too (test/support/test-projects.ts), run again there at the
 * full count; `TEST_LONG=1 npx vitest run <file>` does the same for one file.
 */
export const FULL_RUNS = process.env.TEST_LONG === '1';

export function propertyRuns(runs: { quick: number; full: number }): number {
  if (!(runs.quick > 0 && runs.quick <= runs.full))
    throw new Error(`property runs: want 0 < quick ≤ full, got ${JSON.stringify(runs)}`);
  return FULL_RUNS ? runs.full : runs.quick;
}
