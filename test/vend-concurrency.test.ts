import { describe, expect, it } from 'vitest';
import type { VendResult } from '../shared/vend/responses.js';
import { fixture, parseBody, settleWithClock, type VendHarness } from './support/vend-harness.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

const startHarness = vendHarnessPerTest();
let h: VendHarness;

const settle = (requests: Promise<VendResult>[]) => settleWithClock(h, requests);

const loginAttempts = () => h.sandbox.stats().logins['uat-advisor']?.attempts ?? 0;

describe('50 concurrent requests on a cold, empty cache', () => {
  it('in one container: exactly one vendor login, everyone gets the same token', async () => {
    h = await startHarness({ sandbox: { latencyMs: 30 } });
    const results = await settle(Array.from({ length: 50 }, () => h.invoke(fixture('get-token'))));
    expect(results.map((r) => r.statusCode)).toEqual(Array(50).fill(200));
    expect(new Set(results.map((r) => parseBody<{ tokenId: string }>(r).tokenId)).size).toBe(1);
    expect(h.refreshInvoker.calls).toBe(1);
    expect(loginAttempts()).toBe(1);
    expect(h.sandbox.stats().loginRequests).toBe(1);
  });

  it('across 5 containers (10 requests each, each its own memory and refresher): exactly one vendor login', async () => {
    h = await startHarness({ sandbox: { latencyMs: 30 } });
    const containers = Array.from({ length: 5 }, () => h.newContainer());
    const requests = containers.flatMap((container) =>
      Array.from({ length: 10 }, () => container.invoke(fixture('get-token'))),
    );
    const results = await settle(requests);
    expect(results.map((r) => r.statusCode)).toEqual(Array(50).fill(200));
    expect(new Set(results.map((r) => parseBody<{ tokenId: string }>(r).tokenId)).size).toBe(1);
    // Each container asked its refresher once (in-process single flight); the lease made it one login.
    expect(containers.map((c) => c.refreshInvoker.calls)).toEqual([1, 1, 1, 1, 1]);
    expect(loginAttempts()).toBe(1);
    expect(h.sandbox.stats().loginRequests).toBe(1);
  });
});
