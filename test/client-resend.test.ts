import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import type { BrokerClientOptions } from '../client/types.js';
import { RATE_LIMIT_JITTER_MS } from '../client/vendor-call.js';
import { MemoryTelemetry } from '../shared/observability.js';
import {
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorUnreachableError,
} from '../shared/vendor-client/errors.js';
import { notResent, resendClient, resource, seenBy } from './support/client-resend.js';
import { type BrokerWorld, eventually, SET_ID, startBrokerWorld } from './support/client-world.js';
import { whileAdvancing } from './support/refresher-harness.js';
import { seededRandom } from './support/sandbox-http.js';

/**
 * Which failed vendor requests the client sends again. The vendor is the sandbox over HTTP; "what the vendor saw"
 * is the sandbox's own count of resource requests received (counted on arrival, answered or not). The requests
 * that time out (real time): test/client-resend-timeouts.test.ts, in `npm run test:long`.
 */

describe('BrokerClient.vendorRequest: re-sending only what the vendor cannot have carried out', () => {
  let w: BrokerWorld;
  let telemetry: MemoryTelemetry;
  const servers: Server[] = [];
  beforeEach(async () => {
    w = await startBrokerWorld();
    telemetry = new MemoryTelemetry();
  });
  afterEach(async () => {
    await w.close();
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  const seen = () => seenBy(w);
  const client = (options: Partial<BrokerClientOptions> = {}) => resendClient(w, telemetry, options);

  it('a POST refused with 429 is sent again after Retry-After', async () => {
    const c = client();
    await c.getToken(SET_ID);
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const started = w.clock.now();
    const response = await whileAdvancing(
      w.clock,
      c.vendorRequest(SET_ID, { method: 'POST', path: resource('after-429'), body: { a: 1 } }),
      1000,
      2,
    );
    expect(response.status).toBe(201);
    expect(seen()).toEqual({ POST: 2 });
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '429': 1, '201': 1 });
    // The sandbox's 429 points at the next minute boundary, 59 s away (the clock starts at 09:01:01).
    expect(w.clock.now() - started).toBeGreaterThanOrEqual(59_000);
  });

  it('500, 502, 504 and a proxy 503 page: a POST is sent once; the vendor 503 ("temporary outage") is re-sent', async () => {
    const c = client({ retry: { random: () => 0 } });
    await c.getToken(SET_ID);
    for (const status of [500, 502, 504]) {
      w.sandbox.inject({ status, target: 'resources' });
      const error = await c
        .vendorRequest(SET_ID, { method: 'POST', path: resource(`s-${status}`), body: {} })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(VendorApiError);
      expect(error).toMatchObject({ status });
    }
    w.sandbox.inject({
      raw: { status: 503, body: 'upstream connect error or disconnect/reset before headers' },
      target: 'resources',
    });
    const proxied = await c
      .vendorRequest(SET_ID, { method: 'POST', path: resource('s-proxy'), body: {} })
      .catch((e: unknown) => e);
    expect(proxied).toBeInstanceOf(UnexpectedVendorResponseError);
    expect(seen()).toEqual({ POST: 4 });
    expect(notResent(telemetry).map((l) => l.attributes.status)).toEqual([500, 502, 504, 503]);

    w.sandbox.inject({ status: 503, count: 2, target: 'resources' });
    const response = await c.vendorRequest(SET_ID, { method: 'POST', path: resource('s-503'), body: {} });
    expect(response.status).toBe(201);
    expect(seen()).toEqual({ POST: 7 });
  });

  /** A fetch that sends the first vendor request to `elsewhere` instead of the sandbox. */
  const firstVendorRequestTo = (elsewhere: string): typeof fetch => {
    let diverted = false;
    return (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (!diverted && url.startsWith(w.sandbox.url)) {
        diverted = true;
        return w.fetch(url.replace(w.sandbox.url, elsewhere), init);
      }
      return w.fetch(input, init);
    };
  };

  it('a POST whose connection is refused before it was written is sent again', async () => {
    const port = await closedPort();
    const c = client({ fetch: firstVendorRequestTo(`http://127.0.0.1:${port}`) });
    await c.getToken(SET_ID);
    const response = await whileAdvancing(
      w.clock,
      c.vendorRequest(SET_ID, { method: 'POST', path: resource('after-refused'), body: { a: 1 } }),
      100,
      2,
    );
    expect(response.status).toBe(201);
    expect(seen()).toEqual({ POST: 1 });
    const retried = telemetry.logs.filter((l) => l.message === 'vendor call failed; retrying');
    expect(retried.map((l) => l.attributes.errorCode)).toEqual(['VENDOR_UNREACHABLE']);
  });

  it('a POST whose connection is reset after it was written is not sent again', async () => {
    const received: string[] = [];
    const peer = createServer((socket: Socket) => {
      socket.on('data', (chunk) => {
        received.push(chunk.toString('latin1'));
        socket.resetAndDestroy();
      });
    });
    servers.push(peer);
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
    const { port } = peer.address() as { port: number };
    const c = client({ fetch: firstVendorRequestTo(`http://127.0.0.1:${port}`) });
    await c.getToken(SET_ID);
    const error = await c
      .vendorRequest(SET_ID, { method: 'POST', path: resource('after-reset'), body: { a: 1 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorUnreachableError);
    expect(error).toMatchObject({ notSent: false });
    expect(received.join('')).toMatch(/^POST \/users\/42\//);
    expect(seen()).toEqual({});
  });
});

describe('BrokerClient.vendorRequest: 429 waits are jittered per process', () => {
  let w: BrokerWorld;
  beforeEach(async () => {
    w = await startBrokerWorld();
  });
  afterEach(async () => {
    await w.close();
  });

  it('each process waits Retry-After plus its own jitter, within the bound', async () => {
    const sentAt: number[] = [];
    const timedFetch: typeof fetch = (input, init) => {
      if (String(input instanceof Request ? input.url : input).startsWith(w.sandbox.url))
        sentAt.push(w.clock.now());
      return w.fetch(input, init);
    };
    const processes = [11, 12, 13, 14].map((seed) => {
      const telemetry = new MemoryTelemetry();
      const client: BrokerClient = w.client({
        telemetry,
        fetch: timedFetch,
        retry: { random: seededRandom(seed) },
      });
      return { client, telemetry };
    });
    const reports = () => w.callsTo('POST', '/rate-limit-reports').map((c) => c.body);
    const jitters: number[] = [];
    for (const [i, { client, telemetry }] of processes.entries()) {
      // Each one meets the 429 at the same second of a minute, so the vendor's Retry-After is the same (59 s).
      w.clock.set((Math.floor(w.clock.now() / 60_000) + 2) * 60_000 + 1000);
      w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
      sentAt.length = 0;
      const pending = client
        .vendorRequest(SET_ID, { method: 'GET', path: resource('none') })
        .catch((e: unknown) => e);
      // Straight to just before the end of Retry-After, then in small steps (each wakes at its own time).
      await eventually(() => reports().length === i + 1 && w.clock.pendingSleepers > 0);
      await w.clock.advance(58_000);
      const response = await whileAdvancing(w.clock, pending, 50, 2);
      expect(response).toMatchObject({ code: 'RESOURCE_NOT_FOUND' });
      // The broker is told the vendor's Retry-After as it was; the wait adds the jitter.
      expect(reports()[i]).toMatchObject({ retryAfterSeconds: 59 });
      const waits = telemetry.logs.filter((l) => l.message === 'vendor call failed; retrying');
      expect(waits).toHaveLength(1);
      const delayMs = waits[0]?.attributes.delayMs as number;
      expect(delayMs).toBeGreaterThanOrEqual(59_000);
      expect(delayMs).toBeLessThanOrEqual(59_000 + RATE_LIMIT_JITTER_MS);
      // What the vendor saw: the second request no earlier than the wait said.
      expect(sentAt).toHaveLength(2);
      expect((sentAt[1] ?? 0) - (sentAt[0] ?? 0)).toBeGreaterThanOrEqual(delayMs);
      jitters.push(delayMs - 59_000);
    }
    expect(new Set(jitters).size).toBe(processes.length);
  });
});

/** A port nothing listens on: bind one, then close it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
