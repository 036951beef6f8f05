import { afterEach, describe, expect, it } from 'vitest';
import type { QuotaWindow, VendedToken } from '../client/types.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { InvalidResourcePathError } from '../shared/vendor-client/errors.js';
import {
  type BrokerWorld,
  drivenClient,
  eventually,
  SET_ID,
  startBrokerWorld,
  TENANT,
} from './support/client-world.js';
import { whileAdvancing } from './support/refresher-harness.js';
import { call } from './support/sandbox-http.js';

/**
 * Request classes by path, in the consumer library, against the local broker and the vendor sandox over HTTP:
 * the token answer lists the set's class patterns, vendorRequest takes the class of the path's pattern (a permit
 * of it, and its reports name it), sends a class path of any safe shape, and reports what a class answer says
 * of a limit the ledger does not know.
 *
 * The sandbox here has no endpoint families yet: a class on `/users/7/**` (a literal first segment, which the
 * sandbox serves) stands for reports, and a `/reports/...` path is answered 404 by it, which still shows that it
 * was sent. The broker here does not take `class` in rate-limit reports yet (the learn change adds it): the tests
 * check what the client sends, which the broker's own tests check the other side of.
 */

const REPORTS = { limit: 5, windowSeconds: 60 };
const general = (key: string) => (token: VendedToken) => `/users/42/${token.tenant}/serviceKey/${key}`;
const report = (key: string) => (token: VendedToken) => `/users/7/${token.tenant}/serviceKey/${key}`;

const classWindow = (windows: readonly { class?: string; windowSeconds: number; remaining: number }[]) =>
  windows.find((w) => w.class === 'reports' && w.windowSeconds === 60)?.remaining;

describe('BrokerClient.vendorRequest: request classes by path', () => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  const permitBodies = () => w.callsTo('POST', '/permits').map((c) => c.body);
  const reports = () => w.callsTo('POST', '/rate-limit-reports').map((c) => c.body);

  const start = (classes: Record<string, unknown>) =>
    startBrokerWorld({ set: { rateLimits: { classes, itemFormat: 2 } as never } });

  it('the token answer lists the classes; a path of a class pattern takes a permit of that class', async () => {
    w = await start({
      reports: { paths: ['/users/7/**', '/reports/**'], limits: [REPORTS] },
      bulk: [{ limit: 4, windowSeconds: 60 }],
    });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    expect(token.classes).toEqual([
      { class: 'reports', paths: ['/users/7/**', '/reports/**'], learned: false },
      { class: 'bulk', paths: [], learned: false },
    ]);
    const created = await client.vendorRequest(SET_ID, {
      method: 'POST',
      path: report('r-1'),
      body: { a: 1 },
    });
    expect(created.status).toBe(201);
    const plain = await client.vendorRequest(SET_ID, {
      method: 'POST',
      path: general('g-1'),
      body: { a: 1 },
    });
    expect(plain.status).toBe(201);
    expect(permitBodies()).toEqual([
      { tokenId: token.tokenId, count: 1, class: 'reports' },
      { tokenId: token.tokenId, count: 1 },
    ]);
    // The ledger counted one request of the class (and two general ones).
    expect(classWindow(await w.remaining(token.tokenId))).toBe(REPORTS.limit - 1);
  });

  it('sends a class path of another shape than /users/...: the vendor sees it', async () => {
    w = await start({ reports: { paths: ['/reports/**'], limits: [REPORTS] } });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const outcome = await client.vendorRequest(SET_ID, { method: 'GET', path: '/reports/monthly/2026-01' });
    // The sandbox's reports family answered it (with a class permit taken first).
    expect(outcome).toMatchObject({
      status: 200,
      body: { family: 'reports', path: '/reports/monthly/2026-01' },
    });
    expect(Object.values(w.sandbox.stats().requestsByToken)).toEqual([1]);
    expect(permitBodies()).toEqual([{ tokenId: token.tokenId, count: 1, class: 'reports' }]);
  });

  it.each([
    ['climbs out of the class', '/reports/../restful/login/'],
    ['hides a slash', '/reports/a%2Fb'],
    ['carries a query', '/reports/daily?from=2026-01-01'],
    ['matches no pattern and is not a resource path', '/rebalancing/run-1'],
  ])('a path that %s is refused before any permit, and nothing is sent', async (_what, path) => {
    w = await start({ reports: { paths: ['/reports/**'], limits: [REPORTS] } });
    const client = w.client();
    await client.getToken(SET_ID);
    const error = await client.vendorRequest(SET_ID, { method: 'GET', path }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidResourcePathError);
    expect(permitBodies()).toEqual([]);
    expect(w.sandbox.stats().responsesByStatus).toEqual({});
  });

  it('a named class yields to the class of the path, said once; it still names a path no pattern covers', async () => {
    w = await start({
      reports: { paths: ['/users/7/**'], limits: [REPORTS] },
      bulk: [{ limit: 4, windowSeconds: 60 }],
    });
    const telemetry = new MemoryTelemetry();
    const client = w.client({ telemetry });
    const token = await client.getToken(SET_ID);
    for (const key of ['n-1', 'n-2']) {
      await client.vendorRequest(SET_ID, { method: 'POST', path: report(key), body: {}, class: 'bulk' });
    }
    await client.vendorRequest(SET_ID, { method: 'POST', path: general('b-1'), body: {}, class: 'bulk' });
    expect(permitBodies().map((b) => b.class)).toEqual(['reports', 'reports', 'bulk']);
    const warnings = telemetry.logs.filter((l) => l.message.includes('the path decides'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.attributes).toEqual({ credentialSet: SET_ID, namedClass: 'bulk', class: 'reports' });
    expect(classWindow(await w.remaining(token.tokenId))).toBeLessThan(REPORTS.limit);
  });

  it('a 429 of a class answer is reported with its class', async () => {
    w = await start({ reports: { paths: ['/users/7/**'], limits: [REPORTS] } });
    const client = w.client({ retry: { random: () => 0 } });
    const token = await client.getToken(SET_ID);
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const response = await whileAdvancing(
      w.clock,
      client.vendorRequest(SET_ID, { method: 'POST', path: report('after-429'), body: {} }),
      1000,
      2,
    );
    expect(response.status).toBe(201);
    // Then the success's headers, a limit the ledger has no class window of (the next test says why).
    await eventually(() => reports().length === 2);
    expect(reports()).toEqual([
      {
        tokenId: token.tokenId,
        class: 'reports',
        retryAfterSeconds: 59,
        limit: 50,
        remaining: 0,
        reset: expect.any(Number),
      },
      { tokenId: token.tokenId, class: 'reports', limit: 50, remaining: 49, reset: response.rateLimit.reset },
    ]);
  });

  it('reports a class answer whose X-RateLimit-Limit the ledger has no class window of, once per vendor window', async () => {
    // The class is configured at 5 a minute; this sandbox's answers carry its general headers (50 a minute), a
    // limit the ledger has no window of for the class: what a class that is learned looks like to the client.
    w = await start({ reports: { paths: ['/users/7/**'], limits: [REPORTS] } });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const first = await client.vendorRequest(SET_ID, { method: 'POST', path: report('l-1'), body: {} });
    await eventually(() => reports().length === 1);
    expect(reports()[0]).toEqual({
      tokenId: token.tokenId,
      class: 'reports',
      limit: 50,
      remaining: first.rateLimit.remaining,
      reset: first.rateLimit.reset,
    });
    // The same vendor window again: nothing new to learn. A general answer is not a class's.
    const second = await client.vendorRequest(SET_ID, { method: 'POST', path: report('l-2'), body: {} });
    expect(second.rateLimit.reset).toBe(first.rateLimit.reset);
    await client.vendorRequest(SET_ID, { method: 'POST', path: general('l-3'), body: {} });
    await client.close();
    expect(reports()).toHaveLength(1);
  });

  it('reports a class answer that shows fewer left than the class window of its limit, and not otherwise', async () => {
    // A class limited like the general minute: the answers' X-RateLimit-Limit (50) names the class's window.
    w = await start({ reports: { paths: ['/users/7/**'], limits: [{ limit: 50, windowSeconds: 60 }] } });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    await client.vendorRequest(SET_ID, { method: 'POST', path: report('k-1'), body: {} });
    // Somebody uses the token behind the broker's back: the vendor counts 10 requests the ledger never saw.
    for (let i = 0; i < 10; i++)
      await call(w.sandbox.url, 'GET', `/users/1/${TENANT}/serviceKey/k`, { token: token.accessToken });
    const behind = await client.vendorRequest(SET_ID, { method: 'POST', path: report('k-2'), body: {} });
    await eventually(() => reports().length === 1);
    expect(reports()).toEqual([
      {
        tokenId: token.tokenId,
        class: 'reports',
        limit: 50,
        remaining: behind.rateLimit.remaining,
        reset: behind.rateLimit.reset,
      },
    ]);
  });

  it('from a broker that lists no classes: no classification by path, and reports without class', async () => {
    w = await start({ reports: { paths: ['/users/7/**'], limits: [REPORTS] } });
    // An older broker is played by taking the field out of its token answers.
    const older: typeof fetch = async (input, init) => {
      const response = await w.fetch(input, init);
      if (!String(input).includes('/token')) return response;
      const { classes: _dropped, ...body } = (await response.json()) as Record<string, unknown>;
      return new Response(JSON.stringify(body), { status: response.status, headers: response.headers });
    };
    const client = w.client({ fetch: older, retry: { random: () => 0 } });
    const token = await client.getToken(SET_ID);
    expect(token.classes).toBeUndefined();
    await client.vendorRequest(SET_ID, { method: 'POST', path: report('o-1'), body: {} });
    expect(permitBodies()).toEqual([{ tokenId: token.tokenId, count: 1 }]);
    const outside = await client
      .vendorRequest(SET_ID, { method: 'GET', path: '/reports/monthly' })
      .catch((e: unknown) => e);
    expect(outside).toBeInstanceOf(InvalidResourcePathError);
    // A class the caller names is taken as before, and its 429 reported as before (no `class` field).
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    await whileAdvancing(
      w.clock,
      client.vendorRequest(SET_ID, { method: 'POST', path: report('o-2'), body: {}, class: 'reports' }),
      1000,
      2,
    );
    expect(permitBodies().at(-1)).toMatchObject({ class: 'reports' });
    expect(reports()).toHaveLength(1);
    expect(reports()[0]).not.toHaveProperty('class');
    expect(reports()[0]).toMatchObject({ tokenId: token.tokenId, retryAfterSeconds: 59 });
  });

  it("reportRateLimit of a learned class's answers: once per vendor window (a renewal), as vendorRequest reports them", async () => {
    // The vendor's reports family, 3 per 5 s (fixed windows), which the broker is not told: the class learns it.
    w = await startBrokerWorld({
      sandbox: {
        families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 3, windowSeconds: 5 }] }],
      },
      set: {
        rateLimits: { classes: { reports: { paths: ['/reports/**'], limits: [] } }, itemFormat: 2 } as never,
      },
    });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    expect(token.classes).toEqual([{ class: 'reports', paths: ['/reports/**'], learned: true }]);
    // The service's own call of the class, with a permit of the class, its answer handed over as it came.
    const ownCall = async () => {
      const permit = await client.acquirePermit(SET_ID, token.tokenId, { class: 'reports' });
      const answer = await fetch(`${w.sandbox.url}/reports/daily`, {
        headers: { authorization: `Bearer ${token.accessToken}` },
      });
      permit.markUsed();
      expect(answer.status).toBe(200);
      const { reported } = await client.reportRateLimit(SET_ID, token.tokenId, answer, { class: 'reports' });
      return { reported, reset: Number(answer.headers.get('x-ratelimit-reset')) };
    };
    // The first answer teaches the class its limit; the next vendor window's first answer renews it, although
    // the ledger knows the limit and has no more room than the vendor says.
    const first = await ownCall();
    expect(first.reported).toBe(true);
    await w.clock.advance(5000);
    const second = await ownCall();
    expect(second.reset).toBe(first.reset + 5);
    expect(second.reported).toBe(true);
    expect(reports()).toEqual([
      { tokenId: token.tokenId, class: 'reports', limit: 3, remaining: 2, reset: first.reset },
      { tokenId: token.tokenId, class: 'reports', limit: 3, remaining: 2, reset: second.reset },
    ]);
  });

  it('one principal, a learned class: it stays learned through minutes of steady traffic, never back to the probe, no vendor 429', async () => {
    // The vendor's reports family: 3 per 5 s and 6 per 15 s (fixed windows), which the broker is not told. Its
    // answers tell only the more constrained window at the time, so each answer tells one of the two.
    w = await startBrokerWorld({
      sandbox: {
        families: [
          {
            name: 'reports',
            pathPrefix: '/reports/',
            limits: [
              { limit: 3, windowSeconds: 5 },
              { limit: 6, windowSeconds: 15 },
            ],
          },
        ],
      },
      set: {
        rateLimits: { classes: { reports: { paths: ['/reports/**'], limits: [] } }, itemFormat: 2 } as never,
      },
    });
    // The class's rings as every permit answer (grant or denial) showed them, in order.
    const rings: string[] = [];
    const d = drivenClient(w, {}, async (input, init) => {
      const response = await w.fetch(input, init);
      if (!String(input).endsWith('/permits')) return response;
      const text = await response.text();
      const body = JSON.parse(text) as { remaining?: QuotaWindow[]; details?: { remaining?: QuotaWindow[] } };
      const windows = body.remaining ?? body.details?.remaining ?? [];
      rings.push(
        JSON.stringify(windows.filter((q) => q.class === 'reports').map((q) => [q.limit, q.windowSeconds])),
      );
      return new Response(text, { status: response.status, headers: response.headers });
    });
    const token = await d.client.getToken(SET_ID);
    expect(token.classes).toEqual([{ class: 'reports', paths: ['/reports/**'], learned: true }]);
    const vendor429s = () => w.sandbox.stats().responsesByStatus['429'] ?? 0;
    const startedAt = w.clock.now();
    // Two minutes of one process sending a request of the class every 3 s: under both limits, so every answer
    // is sent at once, and the headers tell now one window, now the other.
    while (w.clock.now() - startedAt < 120_000) {
      const outcome = await d.drive(
        d.client.vendorRequest(SET_ID, { method: 'GET', path: '/reports/daily' }),
      );
      expect(outcome.status).toBe(200);
      // The report of this answer, if any, is on its way (started before the answer returned): let it land.
      await new Promise((resolve) => setTimeout(resolve, 5));
      await eventually(() => d.inFlight === 0);
      await w.clock.advance(3000);
    }
    const probe = JSON.stringify([[1, 10]]);
    // The probe decided the first grant only: from the first learning on, every permit answer is on learned rings.
    expect(rings[0]).toBe(probe);
    expect(rings.slice(1).filter((r) => r === probe)).toEqual([]);
    expect(await w.ledger.learned(SET_ID)).toEqual({ reports: expect.arrayContaining([expect.anything()]) });
    expect(vendor429s()).toBe(0);
    // Every request was answered at once: one every 3 s.
    expect(w.sandbox.stats().responsesByStatus['200']).toBe(40);
  });
});
