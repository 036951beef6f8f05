import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { SlowestFirst } from './test/support/sequencer.js';
import { mocksModules, splitTestFiles, type TestSuite } from './test/support/test-projects.js';

// Projects by what the files import (docs/testing.md, test/support/test-projects.ts). Whether a file starts the
// run's DynamoDB Local (a JVM, seconds on a loaded machine): `dynamodb` and `long-dynamodb` have the global setup
// that starts it, `unit` and `long` start no engine, so one unit file runs in about a second. Whether it waits
// on real time: `npm test` runs `unit` and `dynamodb`; the real-time files are in `long` and `long-dynamodb`,
// which `npm run test:long` runs. `npx vitest run <file>` runs any file, in its project.
//
// `npm run test:long` sets TEST_LONG=1: then the projects are `long-measured` (the classes soaks), `long` and
// `long-dynamodb` (the other real-time files), and `full` and `full-dynamodb`, the files whose property runs have a
// long form (test/support/property-runs.ts) at their full runs; package.json runs the first alone, one file at a
// time, then the others.
const { unit, dynamodb, long, longDynamodb, fullRuns } = splitTestFiles(import.meta.dirname);
const testLong = process.env.TEST_LONG === '1';
/** npm test's files that mock a module: each in a fresh process (test/support/test-projects.ts, mocksModules). */
const isolated = unit.filter((file) => mocksModules(file, import.meta.dirname));
const mockingOnEngines = dynamodb.filter((file) => mocksModules(file, import.meta.dirname));
if (mockingOnEngines.length > 0)
  throw new Error(
    `${mockingOnEngines.join(', ')}: a file on both engines that mocks a module needs a project of its own`,
  );
/** The real-time files that measure use (the classes soaks): test:long runs them alone. */
const measured = long.filter((file) => file.startsWith('test/soak-classes'));

/** One project: its files, whether it starts DynamoDB Local, and its suite (provided to its files). */
function project(
  name: string,
  files: string[],
  suite: TestSuite,
  engine: boolean,
  isolate = suite === 'test:long',
): TestProjectInlineConfiguration {
  return {
    extends: true,
    test: {
      name,
      include: files,
      exclude: [...configDefaults.exclude],
      provide: { testSuite: suite },
      // npm test's files share their worker's process, one after the other (about a third of the suite's CPU is
      // each file importing the same modules again in a fresh one); test/support/shared-process.ts checks that
      // each leaves the environment as it found it. test:long's few, long files, and the files that mock a module
      // (`unit-isolated`), each get a fresh process.
      ...(isolate ? {} : { isolate: false, setupFiles: ['test/support/shared-process.ts'] }),
      // One DynamoDB Local (AWS's engine, a JVM) for the run: these files run on it and on dynalite. Vitest
      // runs a project's global setup only when the run has files of that project.
      ...(engine ? { globalSetup: ['test/global-setup.ts'] } : {}),
    },
  };
}

export default defineConfig({
  test: {
    environment: 'node',
    // Timeouts bound a hang; they are not timings. A loaded 2-core machine runs the heaviest files (fuzz, soaks,
    // DynamoDB Local's start) several times slower than an idle one, and must not fail them for it.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // dynalite and the sandbox are per-file servers on ephemeral ports; files run in parallel.
    pool: 'forks',
    // The slowest files first, across projects (test/support/sequencer.ts): no heavy file left to run alone at the end.
    sequence: { sequencer: SlowestFirst },
    // Two workers on two cores: most files are CPU-bound simulations (dynalite, sandboxes, the ledger's
    // properties on a ManualClock); the soaks of test:long wait on real time, but their margins want the CPU.
    maxWorkers: 2,
    // In CI every test by name, so the log shows which DynamoDB engine (dynalite, DynamoDB Local) each ran on.
    reporters: process.env.CI ? ['verbose'] : ['default'],
    projects: testLong
      ? [
          // The soaks that measure use in real time (the classes soaks: use of the class limits, time to learn),
          // which `npm run test:long` runs first, one file at a time: a CPU-bound file beside one on two cores eats
          // the margins it measures...
          project('long-measured', measured, 'test:long', false),
          // ...then the other real-time files (they assert bounds and counts, not use) and the property files at
          // their full runs, two at a time.
          project(
            'long',
            long.filter((file) => !measured.includes(file)),
            'test:long',
            false,
          ),
          project('long-dynamodb', longDynamodb, 'test:long', true),
          project(
            'full',
            fullRuns.filter((file) => unit.includes(file)),
            'test:long',
            false,
          ),
          project(
            'full-dynamodb',
            fullRuns.filter((file) => dynamodb.includes(file)),
            'test:long',
            true,
          ),
        ]
      : [
          project(
            'unit',
            unit.filter((file) => !isolated.includes(file)),
            'npm test',
            false,
          ),
          project('unit-isolated', isolated, 'npm test', false, true),
          project('dynamodb', dynamodb, 'npm test', true),
          project('long', long, 'test:long', false),
          project('long-dynamodb', longDynamodb, 'test:long', true),
        ],
  },
});
