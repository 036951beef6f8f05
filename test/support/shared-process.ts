// Powertools sets process.env.AWS_SDK_UA_APP_ID when its commons module is first imported, once per process:
// whichever file of a worker imports it first (through shared/) would fail the check below for a change it did
// not make. Imported here, before any file's snapshot, it is part of the environment every file starts from.
import '@aws-lambda-powertools/logger';
import { afterAll, beforeAll } from 'vitest';

/**
 * The setup file of `npm test`'s projects, which run without isolation (vitest.config.ts: `isolate: false`): the
 * test files of a worker run one after the other in one process, sharing its modules, its environment and its
 * globals, instead of a fresh process each (about a third of the suite's CPU time, most of it importing the same
 * modules again). A file must therefore leave the process as it found it: close its servers and clients, restore
 * what it stubs (`vi.unstubAllEnvs()`, `vi.resetModules()` where it imports a module for an environment).
 *
 * This checks the part that a later file would silently depend on: the environment and the global `fetch`. A file
 * that changed them and did not restore them fails, naming what it changed, and the process gets them back.
 */
let environment: Record<string, string | undefined> = {};
let globalFetch: typeof fetch;

beforeAll(() => {
  environment = { ...process.env };
  globalFetch = globalThis.fetch;
});

afterAll(() => {
  const changed = [...new Set([...Object.keys(environment), ...Object.keys(process.env)])]
    .filter((name) => environment[name] !== process.env[name])
    .sort();
  for (const name of changed) {
    const value = environment[name];
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  const fetchChanged = globalThis.fetch !== globalFetch;
  globalThis.fetch = globalFetch;
  if (changed.length > 0 || fetchChanged)
    throw new Error(
      `this test file left ${[...changed.map((name) => `process.env.${name}`), ...(fetchChanged ? ['globalThis.fetch'] : [])].join(', ')} changed: ` +
        "npm test's files share a process (vitest.config.ts, isolate: false), so restore what a file changes " +
        '(vi.stubEnv with vi.unstubAllEnvs(), or put the old value back in afterEach/afterAll; docs/testing.md).',
    );
});
