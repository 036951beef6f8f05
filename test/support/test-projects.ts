import { existsSync, globSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Where each test file runs, read from what it imports (docs/testing.md). Nobody keeps a list: a new file is in
 * the right place by its imports alone. Two questions, each answered by the file and the test modules it imports
 * (directly or through a harness; modules outside test/ are matched by name, never followed):
 *
 * - Does it need the run's DynamoDB Local (a JVM, seconds to start)? It does when it asks vitest for the engine's
 *   endpoint (`inject` of the provided `dynamoDbLocalEndpoint`), as test/support/engines.ts does. Such a file is
 *   in a project with test/global-setup.ts (`dynamodb`, `long-dynamodb`); every other file starts no engine.
 * - Does it wait on real time? It does when it imports test/support/real-time.ts (the marker: a real-time soak, a
 *   broker on its real schedule), or calls a runner that runs on the system clock by name (REAL_TIME_RUNNERS: the
 *   soaks). Such a file runs only in `npm run test:long` (projects `long`, `long-dynamodb`); `npm test` runs
 *   every other file.
 *
 * A file that takes its property runs from test/support/property-runs.ts (`propertyRuns({ quick, full })`) runs
 * in `npm test` at the quick count and again in `npm run test:long` at the full one (`fullRuns`).
 */

/**
 * The one way a test reaches the run's DynamoDB Local (see test/global-setup.ts). Comments and strings count too:
 * at worst a file that only mentions it starts the engine for nothing. This module never spells it out.
 */
const ASKS_FOR_DYNAMODB_LOCAL = /\binject\(\s*['"]dynamoDbLocalEndpoint['"]\s*\)/;
/** Relative specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`. */
const RELATIVE_IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** The marker module, relative to the root: its importers wait on real time. */
export const REAL_TIME_MODULE = 'test/support/real-time.ts';
/**
 * A call of a runner that runs on the system clock by design: `npm run soak`'s soaks (local/soak.ts,
 * local/soak-classes.ts: real token lifetimes, real request pacing). A call, not an import: a file may import
 * their types or pure helpers and wait on nothing. Comments and strings count too (at worst a file moves to
 * test:long, which CI also runs).
 */
const CALLS_A_REAL_TIME_RUNNER = /\b(?:runSoak|runClassesSoak)\s*\(/;
/** The module whose importers have a long form of their property runs (test:long runs them at the full count). */
export const PROPERTY_RUNS_MODULE = 'test/support/property-runs.ts';

export interface TestProjects {
  /** `npm test`, no engine. Paths relative to the root, as vitest's `include` takes them. */
  unit: string[];
  /** `npm test`, on DynamoDB Local (and dynalite). */
  dynamodb: string[];
  /** `npm run test:long` only (they wait on real time), no engine. */
  long: string[];
  /** `npm run test:long` only, on DynamoDB Local. */
  longDynamodb: string[];
  /** Files of `unit` and `dynamodb` run again by `npm run test:long` at their full property runs. */
  fullRuns: string[];
}

/** What a module reaches, itself or through the test modules it imports. */
interface Reach {
  dynamoDbLocal: boolean;
  realTime: boolean;
  propertyRuns: boolean;
}

/** The test files under `root`/test, split by whether they need DynamoDB Local and whether they wait on real time. */
export function splitTestFiles(root: string): TestProjects {
  const known = new Map<string, Reach>();
  const projects: TestProjects = { unit: [], dynamodb: [], long: [], longDynamodb: [], fullRuns: [] };
  for (const file of globSync('test/**/*.test.ts', { cwd: root }).sort()) {
    const reach = reachOf(path.join(root, file), root, known);
    const name = file.split(path.sep).join('/');
    if (reach.realTime) projects[reach.dynamoDbLocal ? 'longDynamodb' : 'long'].push(name);
    else {
      projects[reach.dynamoDbLocal ? 'dynamodb' : 'unit'].push(name);
      if (reach.propertyRuns) projects.fullRuns.push(name);
    }
  }
  return projects;
}

/**
 * What `file` reaches. Test modules (under `root`/test) are read and followed; modules elsewhere (shared/,
 * local/, …) are not: they never call vitest's `inject`, and a soak runner counts where a test calls it.
 */
function reachOf(file: string, root: string, known: Map<string, Reach>): Reach {
  const testDir = path.join(root, 'test');
  const realTime = path.join(root, REAL_TIME_MODULE);
  const propertyRuns = path.join(root, PROPERTY_RUNS_MODULE);
  const seen = new Set<string>();
  const visit = (module: string): Reach => {
    const answer = known.get(module);
    if (answer !== undefined) return answer;
    const reach: Reach = {
      dynamoDbLocal: false,
      realTime: module === realTime,
      propertyRuns: module === propertyRuns,
    };
    // An import circle (the lint refuses them): its other modules decide.
    if (seen.has(module)) return reach;
    seen.add(module);
    const source = readFileSync(module, 'utf8');
    reach.dynamoDbLocal = ASKS_FOR_DYNAMODB_LOCAL.test(source);
    reach.realTime ||= CALLS_A_REAL_TIME_RUNNER.test(source);
    for (const match of source.matchAll(RELATIVE_IMPORT)) {
      const imported = resolveTestModule(path.dirname(module), match[1] as string, testDir);
      if (imported === undefined) continue;
      const theirs = visit(imported);
      reach.dynamoDbLocal ||= theirs.dynamoDbLocal;
      reach.realTime ||= theirs.realTime;
      reach.propertyRuns ||= theirs.propertyRuns;
    }
    known.set(module, reach);
    return reach;
  };
  return visit(file);
}

/** A module mock of vitest's (`vi.mock`, `vi.doMock`): hoisted per file, it needs the file's own module graph. */
const MOCKS_A_MODULE = /\bvi\.(?:mock|doMock)\(/;

/**
 * Whether the test file `file` (relative to `root`) mocks a module. npm test's files share their worker's process
 * and its module cache (vitest.config.ts, `isolate: false`): a module another file loaded first would reach a mock
 * unmocked, so such a file runs isolated, in a fresh process of its own (project `unit-isolated`).
 */
export function mocksModules(file: string, root: string): boolean {
  return MOCKS_A_MODULE.test(readFileSync(path.resolve(root, file), 'utf8'));
}

/** The TypeScript source a relative `.js` specifier names, when it is a test module. */
function resolveTestModule(from: string, specifier: string, testDir: string): string | undefined {
  const target = path.resolve(from, specifier);
  if (!target.startsWith(`${testDir}${path.sep}`)) return undefined;
  const candidates = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`];
  return candidates.find((candidate) => /\.[cm]?[jt]s$/.test(candidate) && existsSync(candidate));
}

/**
 * The endpoint of the run's DynamoDB Local, or an error that says why there is none: the file runs in a project
 * that starts no engine (`unit`, `long`). That happens only when a file reaches the engine in a way the imports
 * above do not show (a computed import or key): import test/support/engines.ts, or inject
 * `dynamoDbLocalEndpoint` by name.
 */
export function requireDynamoDbLocal(endpoint: string | undefined): string {
  if (endpoint) return endpoint;
  throw new Error(
    'no DynamoDB Local in this run: this test file is in the `unit` (or `long`) vitest project, which starts ' +
      'none. Files that import test/support/engines.ts or inject `dynamoDbLocalEndpoint` by name (directly or ' +
      'through a test/support module) are put in the `dynamodb` (or `long-dynamodb`) project ' +
      '(test/support/test-projects.ts, docs/testing.md).',
  );
}

/** Which suite a project belongs to, provided to its files as `testSuite` (vitest.config.ts). */
export type TestSuite = 'npm test' | 'test:long';

/**
 * Nothing, or an error that says why a file that waits on real time is in a project of `npm test`: it reached
 * test/support/real-time.ts in a way the imports above do not show (a computed import).
 */
export function requireLongSuite(suite: TestSuite | undefined): void {
  if (suite === 'test:long') return;
  throw new Error(
    'this test file waits on real time (it imports test/support/real-time.ts), so it belongs to ' +
      '`npm run test:long`, but it runs in a project of `npm test`: import test/support/real-time.ts by a ' +
      'literal specifier, directly or through a test/support module (test/support/test-projects.ts, ' +
      'docs/testing.md).',
  );
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The suite of the file's project (vitest.config.ts): test/support/real-time.ts checks it. */
    testSuite: TestSuite;
  }
}
