import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { propagationRun } from './support/lifecycle-sims.js';

let dynamo: LocalDynamo;
beforeAll(async () => {
  dynamo = await startDynalite();
});
afterAll(async () => {
  await dynamo.close();
});

describe('a rejection-driven re-login', () => {
  it('is served by all of 20 vend instances within a second (simulated), at one version read per instance-second', async () => {
    const r = await propagationRun(dynamo, { instances: 20, versionCheckMs: 1000 });
    expect(r.lastStaleServeMs).toBeLessThanOrEqual(1000);
    // Warm: a full read per 30 s TTL, and one version check a second per instance.
    expect(r.fullReadsPerInstanceSecond).toBeLessThanOrEqual(0.05);
    expect(r.versionReadsPerInstanceSecond).toBeLessThanOrEqual(1);
    expect(r.versionReadsPerInstanceSecond).toBeGreaterThan(0.9);
  }, 120_000);

  it('without the version check, instances keep the rejected token for their whole cache TTL', async () => {
    const r = await propagationRun(dynamo, {
      instances: 3,
      versionCheckMs: 0,
      stepMs: 1000,
      afterMs: 31_000,
    });
    expect(r.lastStaleServeMs).toBeGreaterThan(20_000);
  }, 120_000);
});
