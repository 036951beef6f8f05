import { afterAll, afterEach, beforeAll } from 'vitest';
import { type LocalDynamo, startDynalite } from './dynalite.js';
import { startVendHarness, type VendHarness } from './vend-harness.js';

export type VendHarnessOptions = Parameters<typeof startVendHarness>[1];

/**
 * For a test file whose tests each start their own harness: one dynalite for the file, and the harness a
 * test started closed after it. Call at the top level; tests start their harness with the function returned.
 * (Kept apart from vend-harness.ts, which the benchmarks import outside vitest.)
 */
export function vendHarnessPerTest(): (options?: VendHarnessOptions) => Promise<VendHarness> {
  let dynamo: LocalDynamo | undefined;
  let started: VendHarness | undefined;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo?.close();
  });
  afterEach(async () => {
    await started?.close();
    started = undefined;
  });
  return async (options) => {
    if (!dynamo) throw new Error('vendHarnessPerTest: start the harness inside a test');
    started = await startVendHarness(dynamo, options);
    return started;
  };
}
