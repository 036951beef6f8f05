import { type TestFunction, it as vitestIt } from 'vitest';

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

/** A test's name, body and timeout, as `it` takes them. */
type DefineTest = (name: string, fn: TestFunction, timeout?: number) => void;

/**
 * What test:long runs of the tests that take turns in `npm test`: `'both engines'`, each on each engine (a file
 * whose runs also have a long form, run again there at full length), or `'the other engine'`, each on the engine
 * `npm test` left it (cases of one length: each runs once on each engine over the two suites). The file's other
 * tests run again on both engines in test:long either way (a `describe` left with no test fails its file).
 */
export type InTestLong = 'both engines' | 'the other engine';

/**
 * `it` for a `describe.each(ENGINES)` body whose heavy simulations take turns (takesTurn): `turns` gives, by the
 * start of its name, each such test's turn: it is defined on this engine in `npm test` only when its turn it is,
 * in test:long as `inTestLong` says; every other test (and `it.each`'s) as `it` defines it. Shadow `it` with it in
 * the body: `const it = itTakingTurns(engine, ENGINES, { 'a process 2 minutes ahead': 0 })`. A name that no
 * longer starts as listed runs on both engines in each suite: slower, never lost.
 */
export function itTakingTurns(
  engine: string,
  engines: readonly string[],
  turns: Record<string, number>,
  inTestLong: InTestLong = 'both engines',
): DefineTest & Pick<typeof vitestIt, 'each'> {
  const define: DefineTest = (name, fn, timeout) => {
    const turn = Object.entries(turns).find(([start]) => name.startsWith(start))?.[1];
    if (turn === undefined || takesTurn(engine, engines, turn, inTestLong)) vitestIt(name, fn, timeout);
  };
  return Object.assign(define, { each: vitestIt.each.bind(vitestIt) });
}

/**
 * Whether a heavy simulation of a file on both engines (`describe.each(ENGINES)`) runs on `engine` in this suite.
 * In `npm test` on one, the engines taking turns by the test's `turn` (0, 1, …), so that `npm test` still plays
 * the file's simulations on both engines, each once, instead of each twice (as the learned-limits property's runs
 * take turns); in test:long (this module's importers run again there) as `inTestLong` says. A plain `if` around the
 * `it`, not `it.skipIf`: neither suite lists a skipped test.
 */
export function takesTurn(
  engine: string,
  engines: readonly string[],
  turn: number,
  inTestLong: InTestLong = 'both engines',
): boolean {
  const index = engines.indexOf(engine);
  if (index < 0) throw new Error(`takesTurn: ${engine} is not one of ${engines.join(', ')}`);
  const ours = turn % engines.length === index;
  if (!FULL_RUNS) return ours;
  return inTestLong === 'both engines' || !ours;
}

/**
 * The engines a whole `describe.each` block of one file runs on in this suite (takesTurn for each): in `npm test`
 * the one whose turn it is, in test:long as `inTestLong` says. For a file whose every test is a heavy simulation,
 * where itTakingTurns would leave a `describe` with no test: `describe.each(enginesTakingTurns(ENGINES, 0))`.
 */
export function enginesTakingTurns<E extends string>(
  engines: readonly E[],
  turn: number,
  inTestLong: InTestLong = 'the other engine',
): E[] {
  return engines.filter((engine) => takesTurn(engine, engines, turn, inTestLong));
}
