import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // One DynamoDB Local (AWS's engine, a JVM) for the run: the DynamoDB tests run on it and on dynalite.
    globalSetup: ['test/global-setup.ts'],
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
  },
});
