import { configDefaults, defineConfig } from 'vitest/config';
import { splitTestFiles } from './test/support/test-projects.js';

// Two projects, one run (`npm test` runs both): the files that use DynamoDB Local, by what they import, get the
// global setup that starts it (a JVM, seconds on a loaded machine); every other file starts no engine, so one unit
// file runs in about a second (docs/testing.md).
const { dynamodb } = splitTestFiles(import.meta.dirname);

export default defineConfig({
  test: {
    environment: 'node',
    // Timeouts bound a hang; they are not timings. A loaded 2-core machine runs the heaviest files (fuzz, soaks,
    // DynamoDB Local's start) several times slower than an idle one, and must not fail them for it.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // dynalite and the sandbox are per-file servers on ephemeral ports; files run in parallel.
    pool: 'forks',
    // Most files wait on loopback I/O (dynalite, sandboxes, the soak's real-time run): two workers on two cores.
    maxWorkers: 2,
    // In CI every test by name, so the log shows which DynamoDB engine (dynalite, DynamoDB Local) each ran on.
    reporters: process.env.CI ? ['verbose'] : ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...dynamodb],
        },
      },
      {
        extends: true,
        test: {
          name: 'dynamodb',
          include: dynamodb,
          // One DynamoDB Local (AWS's engine, a JVM) for the run: these files run on it and on dynalite. Vitest
          // runs a project's global setup only when the run has files of that project.
          globalSetup: ['test/global-setup.ts'],
        },
      },
    ],
  },
});
