import { existsSync, globSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Which test files need the run's DynamoDB Local (a JVM, seconds to start), read from what they import: a file
 * belongs to the `dynamodb` project (vitest.config.ts, the one with test/global-setup.ts) when it, or a test
 * module it imports (test/support/engines.ts, directly or through a harness), asks for the engine's endpoint
 * (vitest's `inject` of the provided `dynamoDbLocalEndpoint`); every other file is in the `unit` project, which starts no engine.
 * Nobody keeps a list: a new file that uses both engines is in the right project by its imports alone.
 */

/**
 * The one way a test reaches the run's DynamoDB Local (see test/global-setup.ts). Comments and strings count too:
 * at worst a file that only mentions it starts the engine for nothing. This module never spells it out.
 */
const ASKS_FOR_DYNAMODB_LOCAL = /\binject\(\s*['"]dynamoDbLocalEndpoint['"]\s*\)/;
/** Relative specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`. */
const RELATIVE_IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

export interface TestProjects {
  /** Paths relative to the root, as vitest's `include` takes them. */
  unit: string[];
  dynamodb: string[];
}

/** The test files under `root`/test, split by whether they need DynamoDB Local. */
export function splitTestFiles(root: string): TestProjects {
  const testDir = path.join(root, 'test');
  const needs = new Map<string, boolean>();
  const projects: TestProjects = { unit: [], dynamodb: [] };
  for (const file of globSync('test/**/*.test.ts', { cwd: root }).sort()) {
    const project = needsDynamoDbLocal(path.join(root, file), testDir, needs) ? 'dynamodb' : 'unit';
    projects[project].push(file.split(path.sep).join('/'));
  }
  return projects;
}

/**
 * Whether `file` or a module under `testDir` that it imports (transitively) asks for DynamoDB Local. Modules
 * outside the tests (shared/, local/, …) are not followed: they never call vitest's `inject`.
 */
export function needsDynamoDbLocal(
  file: string,
  testDir: string,
  known = new Map<string, boolean>(),
): boolean {
  const seen = new Set<string>();
  const visit = (module: string): boolean => {
    const answer = known.get(module);
    if (answer !== undefined) return answer;
    if (seen.has(module)) return false; // an import circle (the lint refuses them): its other modules decide
    seen.add(module);
    const source = readFileSync(module, 'utf8');
    const result =
      ASKS_FOR_DYNAMODB_LOCAL.test(source) ||
      [...source.matchAll(RELATIVE_IMPORT)].some((match) => {
        const imported = resolveTestModule(path.dirname(module), match[1] as string, testDir);
        return imported !== undefined && visit(imported);
      });
    known.set(module, result);
    return result;
  };
  return visit(path.resolve(file));
}

/** The TypeScript source a relative `.js` specifier names, when it is a test module. */
function resolveTestModule(from: string, specifier: string, testDir: string): string | undefined {
  const target = path.resolve(from, specifier);
  if (!target.startsWith(`${testDir}${path.sep}`)) return undefined;
  const candidates = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`];
  return candidates.find((candidate) => /\.[cm]?[jt]s$/.test(candidate) && existsSync(candidate));
}

/**
 * The endpoint of the run's DynamoDB Local, or an error that says why there is none: the file runs in the `unit`
 * project, which starts no engine. That happens only when a file reaches the engine in a way the imports above do
 * not show (a computed import or key): import test/support/engines.ts, or inject `dynamoDbLocalEndpoint` by name.
 */
export function requireDynamoDbLocal(endpoint: string | undefined): string {
  if (endpoint) return endpoint;
  throw new Error(
    'no DynamoDB Local in this run: this test file is in the `unit` vitest project, which starts none. Files ' +
      'that import test/support/engines.ts or inject `dynamoDbLocalEndpoint` by name (directly or through a ' +
      'test/support module) are put in the `dynamodb` project (test/support/test-projects.ts, docs/testing.md).',
  );
}
