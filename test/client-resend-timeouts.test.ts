import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BrokerClientOptions } from '../client/types.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { VendorTimeoutError } from '../shared/vendor-client/errors.js';
import { notResent, resendClient, resource, seenBy } from './support/client-resend.js';
import { type BrokerWorld, eventually, SET_ID, startBrokerWorld } from './support/client-world.js';
import { whileAdvancing } from './support/refresher-harness.js';
// The client's vendor timeout is a timer of real time (2 s an attempt): these tests wait it out.
import './support/real-time.js';

/**
 * Which vendor requests that time out the client sends again: a POST never (the vendor may have it), a GET and a
 * POST marked idempotent once more. Each waits out the client's 2 s vendor timeout in real time, so they run in
 * `npm run test:long`; the other failures: test/client-resend.test.ts (`npm test`).
 */

/** Much longer than any client timeout here: a request in it is one the vendor has, but has not answered. */
const HANG_MS = 60_000;

describe('BrokerClient.vendorRequest: re-sending a request that timed out only where the vendor cannot have acted', () => {
  let w: BrokerWorld;
  let telemetry: MemoryTelemetry;
  beforeEach(async () => {
    w = await startBrokerWorld();
    telemetry = new MemoryTelemetry();
  });
  afterEach(async () => {
    await w.close();
  });

  const seen = () => seenBy(w);
  const client = (options: Partial<BrokerClientOptions> = {}) => resendClient(w, telemetry, options);
  /** The request in flight is held by the vendor; the next one is answered at once. */
  const hangOnlyTheFirst = async () => {
    await eventually(() => Object.values(seen()).reduce((a, b) => a + b, 0) === 1);
    w.sandbox.update({ latencyMs: 0 });
  };

  it('a POST that times out is sent once, and the timeout is the answer', async () => {
    const c = client();
    await c.getToken(SET_ID);
    w.sandbox.update({ latencyMs: HANG_MS });
    const error = await c
      .vendorRequest(SET_ID, { method: 'POST', path: resource('order-1'), body: { amount: 100 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorTimeoutError);
    expect(seen()).toEqual({ POST: 1 });
    expect(notResent(telemetry)).toEqual([
      expect.objectContaining({ attributes: expect.objectContaining({ errorCode: 'VENDOR_TIMEOUT' }) }),
    ]);
    expect(w.clock.pendingSleepers).toBe(0);
  });

  it('a GET that times out is retried, and the retry is answered', async () => {
    const c = client();
    await c.vendorRequest(SET_ID, { method: 'POST', path: resource('k'), body: { name: 'Ada' } });
    w.sandbox.resetStats();
    w.sandbox.update({ latencyMs: HANG_MS });
    const pending = c.vendorRequest<{ name: string }>(SET_ID, { method: 'GET', path: resource('k') });
    await hangOnlyTheFirst();
    const response = await whileAdvancing(w.clock, pending, 100, 2);
    expect(response.body.name).toBe('Ada');
    expect(seen()).toEqual({ GET: 2 });
    expect(notResent(telemetry)).toHaveLength(0);
  });

  it('a POST marked idempotent: true is retried after a timeout', async () => {
    const c = client();
    await c.getToken(SET_ID);
    w.sandbox.update({ latencyMs: HANG_MS });
    const pending = c.vendorRequest(SET_ID, {
      method: 'POST',
      path: resource('upsert-1'),
      body: { name: 'Ada' },
      idempotent: true,
    });
    await hangOnlyTheFirst();
    const response = await whileAdvancing(w.clock, pending, 100, 2);
    expect(response.status).toBe(201);
    expect(seen()).toEqual({ POST: 2 });
  });

  it('idempotent: false makes a PUT as careful as a POST', async () => {
    const c = client();
    await c.getToken(SET_ID);
    w.sandbox.update({ latencyMs: HANG_MS });
    const error = await c
      .vendorRequest(SET_ID, { method: 'PUT', path: resource('p'), body: { x: 1 }, idempotent: false })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorTimeoutError);
    expect(seen()).toEqual({ PUT: 1 });
  });
});
