import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { VendedToken } from '../client/types.js';
import { Metric } from '../shared/metric-names.js';
import { InvalidResourcePathError, VendorApiError } from '../shared/vendor-client/errors.js';
import {
  type BrokerWorld,
  eventually,
  minuteRemaining,
  SET_ID,
  startBrokerWorld,
  TENANT,
} from './support/client-world.js';
import { whileAdvancing } from './support/refresher-harness.js';
import { call } from './support/sandbox-http.js';

const resource = (key: string) => (token: VendedToken) => `/users/42/${token.tenant}/serviceKey/${key}`;
const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

describe('BrokerClient.vendorRequest', () => {
  let w: BrokerWorld;
  beforeEach(async () => {
    w = await startBrokerWorld();
  });
  afterEach(async () => {
    await w.close();
  });

  const grants = () => w.callsTo('POST', '/permits').map((c) => c.body.count as number);
  const reports = () => w.callsTo('POST', '/rate-limit-reports').map((c) => c.body);
  const rejections = () => w.callsTo('POST', '/token/rejections').map((c) => c.body);

  it('sends with the vended token and a permit, and returns the vendor answer', async () => {
    const client = w.client();
    const created = await client.vendorRequest<{ name: string }>(SET_ID, {
      method: 'POST',
      path: resource('client-1'),
      body: { name: 'Ada' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ name: 'Ada' });
    const read = await client.vendorRequest<{ name: string }>(SET_ID, {
      method: 'GET',
      path: resource('client-1'),
    });
    expect(read.status).toBe(200);
    expect(read.body.name).toBe('Ada');
    expect(read.rateLimit).toMatchObject({ limit: 50, remaining: 48 });
    expect(read.requestId).toMatch(/^req-/);
    const stats = w.sandbox.stats();
    expect(stats.responsesByStatus).toEqual({ '201': 1, '200': 1 });
    expect(sum(stats.requestsByToken)).toBe(2);
    // Every request had a permit: batches of 1, then 2 (one still in hand).
    expect(grants()).toEqual([1, 2]);
    const token = await client.getToken(SET_ID);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(47);
  });

  it('429: reports it to the broker (a cooldown for all), waits Retry-After on the clock, then succeeds', async () => {
    const client = w.client();
    const token = await client.getToken(SET_ID);
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const started = w.clock.now();
    const response = await whileAdvancing(
      w.clock,
      client.vendorRequest(SET_ID, { method: 'POST', path: resource('after-429'), body: { a: 1 } }),
      1000,
      2,
    );
    expect(response.status).toBe(201);
    // The sandbox's 429 points at the next minute boundary (the clock starts at 09:01:01).
    expect(reports()).toEqual([
      { tokenId: token.tokenId, retryAfterSeconds: 59, limit: 50, remaining: 0, reset: expect.any(Number) },
    ]);
    expect(w.brokerTelemetry.sum(Metric.VendorRateLimitReported)).toBe(1);
    expect(w.clock.now() - started).toBeGreaterThanOrEqual(59_000);
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '429': 1, '201': 1 });
  });

  it('429: the broker holds back every consumer of the token until Retry-After', async () => {
    const client = w.client();
    const other = w.client({ retry: { random: () => 0 } });
    const token = await client.getToken(SET_ID);
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const first = client
      .vendorRequest(SET_ID, { method: 'GET', path: resource('x') })
      .catch((e: unknown) => e);
    await eventually(() => reports().length === 1 && w.clock.pendingSleepers > 0);
    const denied = await other
      .acquirePermit(SET_ID, token.tokenId, { maxWaitMs: 0 })
      .catch((e: unknown) => e);
    expect(denied).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
    // Held back for the vendor's Retry-After (59 s), give or take the ledger's rounding and margin.
    const heldSeconds = (denied as { retryAfterSeconds: number }).retryAfterSeconds;
    expect(heldSeconds).toBeGreaterThanOrEqual(59);
    expect(heldSeconds).toBeLessThanOrEqual(59 + w.set.rateLimits.marginSeconds + 1);
    await whileAdvancing(w.clock, first, 1000, 2);
  });

  it('5xx: backs off with full jitter and retries, each attempt with a new permit', async () => {
    const client = w.client({ retry: { random: () => 1 } });
    w.sandbox.inject({ status: 503, count: 2, target: 'resources' });
    const started = w.clock.now();
    const response = await whileAdvancing(
      w.clock,
      client.vendorRequest(SET_ID, { method: 'POST', path: resource('after-5xx'), body: { a: 1 } }),
      100,
      2,
    );
    expect(response.status).toBe(201);
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '503': 2, '201': 1 });
    // random() = 1: the full ceilings, 200 then 400 ms (+1 each: the jitter is inclusive).
    expect(w.clock.now() - started).toBeGreaterThanOrEqual(602);
    expect(grants().reduce((a, b) => a + b, 0)).toBe(3);
  });

  it('5xx: gives up after maxAttempts with the vendor error', async () => {
    const client = w.client({ retry: { maxAttempts: 3, random: () => 0 } });
    w.sandbox.inject({ status: 502, count: 10, target: 'resources' });
    const error = await client
      .vendorRequest(SET_ID, { method: 'GET', path: resource('x') })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorApiError);
    expect(error).toMatchObject({ status: 502 });
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '502': 3 });
  });

  it('never sends a token that a wait (here after a 429) took below the floor: asks the broker for the token to use', async () => {
    const client = w.client({ tokenMarginSeconds: 0, tokenSwitchSpreadSeconds: 0 });
    const old = await client.getToken(SET_ID);
    // 320 s left: the cached token fits (floor 300 s, no margin); the 429's wait of about a minute takes it below.
    await w.clock.advance(old.expiresAtMs - w.clock.now() - 320_000);
    const logins = w.sandbox.stats().loginRequests;
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const sent: { tokenId: string; leftMs: number }[] = [];
    const response = await whileAdvancing(
      w.clock,
      client.vendorRequest(SET_ID, {
        method: 'POST',
        path: (token) => {
          sent.push({ tokenId: token.tokenId, leftMs: token.expiresAtMs - w.clock.now() });
          return `/users/42/${token.tenant}/serviceKey/after-wait`;
        },
        body: { a: 1 },
      }),
      1000,
      2,
    );
    expect(response.status).toBe(201);
    const current = await client.getToken(SET_ID);
    expect(current.tokenId).not.toBe(old.tokenId);
    // The broker logged in on demand (the old token had less than its floor); two requests reached the vendor:
    // the 429 with the old token, the resend with the new one (the old one, below the floor, was not sent).
    const stats = w.sandbox.stats();
    expect(stats.loginRequests).toBe(logins + 1);
    expect(stats.resourceRequests).toEqual({ POST: 2 });
    expect(stats.responsesByStatus).toMatchObject({ '429': 1, '201': 1 });
    // The path is built per attempt, before its permit: the 429's, the old token's after the wait (not sent),
    // and the new token's.
    expect(sent.map((s) => s.tokenId)).toEqual([old.tokenId, old.tokenId, current.tokenId]);
    expect(sent[1]?.leftMs).toBeLessThan(300_000);
    expect(sent.at(-1)?.leftMs).toBeGreaterThanOrEqual(300_000);
  });

  it('401 TOKEN_EXPIRED: reports the rejection, takes the new token and retries once', async () => {
    const client = w.client();
    const old = await client.getToken(SET_ID);
    const logins = w.sandbox.stats().loginRequests;
    w.sandbox.inject({ errorCode: 'TOKEN_EXPIRED', target: 'resources' });
    const response = await client.vendorRequest(SET_ID, {
      method: 'POST',
      path: resource('after-401'),
      body: {},
    });
    expect(response.status).toBe(201);
    expect(rejections()).toEqual([
      { tokenId: old.tokenId, errorCode: 'TOKEN_EXPIRED', requestId: expect.stringMatching(/^req-/) },
    ]);
    // The rejected token was the current one: the broker logged in again.
    expect(w.sandbox.stats().loginRequests).toBe(logins + 1);
    const now = await client.getToken(SET_ID);
    expect(now.tokenId).not.toBe(old.tokenId);
    expect(w.callsTo('GET', '/token')).toHaveLength(1);
  });

  it('401 twice: the retry happens once only, and the second 401 is the answer', async () => {
    const client = w.client();
    w.sandbox.inject({ errorCode: 'TOKEN_EXPIRED', target: 'resources', count: 2 });
    const error = await client
      .vendorRequest(SET_ID, { method: 'GET', path: resource('x') })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'TOKEN_EXPIRED', status: 401 });
    expect(rejections()).toHaveLength(1);
    // Two resource calls, both 401; the 200 is the broker's re-login after the report.
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '401': 2, '200': 1 });
    expect(w.sandbox.stats().loginRequests).toBe(1);
  });

  it('401 TOKEN_INVALID after the vendor dropped an older token: one report for all callers, no new login', async () => {
    w.sandbox.update({ invalidatePreviousTokenOnLogin: true });
    const client = w.client();
    const old = await client.getToken(SET_ID);
    // The broker logs in again (another consumer reported the token, say): the vendor now refuses the old one.
    const outcome = await w.refresher.refreshOne({
      credentialSetId: SET_ID,
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: old.tokenId,
    });
    expect(outcome).toMatchObject({ status: 'CURRENT', loggedIn: true });
    const logins = w.sandbox.stats().loginRequests;
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.vendorRequest(SET_ID, { method: 'POST', path: resource(`c-${i}`), body: { i } }),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(rejections()).toEqual([
      expect.objectContaining({ tokenId: old.tokenId, errorCode: 'TOKEN_INVALID' }),
    ]);
    expect(w.sandbox.stats().loginRequests).toBe(logins);
    expect((await client.getToken(SET_ID)).tokenId).toBe(outcome.status === 'CURRENT' ? outcome.tokenId : '');
  });

  it('other 4xx are final: one request each, no retry, the vendor error as it was', async () => {
    const client = w.client();
    const missing = await client
      .vendorRequest(SET_ID, { method: 'GET', path: resource('nobody') })
      .catch((e: unknown) => e);
    expect(missing).toMatchObject({ code: 'RESOURCE_NOT_FOUND', status: 404 });
    const wrongTenant = await client
      .vendorRequest(SET_ID, { method: 'GET', path: '/users/42/another-tenant/serviceKey/x' })
      .catch((e: unknown) => e);
    expect(wrongTenant).toMatchObject({ code: 'WRONG_TENANT', status: 403 });
    w.sandbox.inject({ errorCode: 'GUIDELINE_VIOLATION', target: 'resources' });
    const guideline = await client
      .vendorRequest(SET_ID, { method: 'PUT', path: resource('p'), body: { x: 1 } })
      .catch((e: unknown) => e);
    expect(guideline).toMatchObject({
      code: 'GUIDELINE_VIOLATION',
      status: 422,
      details: { violations: expect.any(Array) },
    });
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '404': 1, '403': 1, '422': 1 });
    expect(rejections()).toHaveLength(0);
    expect(reports()).toHaveLength(0);
  });

  it('a path of the wrong shape costs no permit and sends nothing', async () => {
    const client = w.client();
    await client.getToken(SET_ID);
    const error = await client
      .vendorRequest(SET_ID, { method: 'GET', path: `/users/42/${TENANT}/../../restful/login/` })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidResourcePathError);
    expect(grants()).toEqual([]);
    expect(w.sandbox.stats().responsesByStatus).toEqual({});
  });

  it('reports X-RateLimit-* when the vendor has counted more than the ledger (once per window and level)', async () => {
    const client = w.client();
    const token = await client.getToken(SET_ID);
    // Somebody uses the token behind the broker's back: the vendor counts 10 requests the ledger never saw.
    for (let i = 0; i < 10; i++)
      await call(w.sandbox.url, 'GET', `/users/1/${TENANT}/serviceKey/k`, { token: token.accessToken });
    const response = await client.vendorRequest(SET_ID, { method: 'POST', path: resource('r'), body: {} });
    expect(response.rateLimit).toMatchObject({ limit: 50, remaining: 39 });
    await eventually(() => reports().length === 1);
    expect(reports()[0]).toEqual({
      tokenId: token.tokenId,
      limit: 50,
      remaining: 39,
      reset: response.rateLimit.reset,
    });
    // The ledger became more careful (once the broker has answered the report, which the client does not await).
    await eventually(async () => (minuteRemaining(await w.remaining(token.tokenId)) ?? 50) <= 39);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBeLessThanOrEqual(39);
    // The next answer agrees with the ledger: nothing more to report.
    await client.vendorRequest(SET_ID, { method: 'POST', path: resource('s'), body: {} });
    await client.close();
    expect(reports()).toHaveLength(1);
  });

  it('an abort during the wait after a 429 ends the request at once', async () => {
    const client = w.client();
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const controller = new AbortController();
    const pending = client
      .vendorRequest(SET_ID, { method: 'GET', path: resource('x'), signal: controller.signal })
      .catch((e: unknown) => e);
    await eventually(() => reports().length === 1 && w.clock.pendingSleepers > 0);
    controller.abort();
    expect(await pending).toMatchObject({ code: 'REQUEST_ABORTED' });
  });

  it('uses the vendor URL the token answer names', async () => {
    const client = w.client({ vendorBaseUrls: {} });
    const created = await client.vendorRequest(SET_ID, { method: 'POST', path: resource('named'), body: {} });
    expect(created.status).toBe(201);
    expect((await client.getToken(SET_ID)).vendorBaseUrl).toBe(w.sandbox.url);
  });

  it('falls back to vendorBaseUrls[set] when the answer names none, and says what is missing when neither', async () => {
    // A broker that does not name the vendor URL is played by taking the field out of its answer.
    const unnamed: typeof fetch = async (input, init) => {
      const response = await w.fetch(input, init);
      if (!String(input).includes('/token')) return response;
      const { vendorBaseUrl: _dropped, ...body } = (await response.json()) as Record<string, unknown>;
      return new Response(JSON.stringify(body), { status: response.status, headers: response.headers });
    };
    const configured = w.client({ fetch: unnamed });
    expect((await configured.getToken(SET_ID)).vendorBaseUrl).toBeUndefined();
    const created = await configured.vendorRequest(SET_ID, {
      method: 'POST',
      path: resource('fallback'),
      body: {},
    });
    expect(created.status).toBe(201);
    const neither = w.client({ fetch: unnamed, vendorBaseUrls: {} });
    await expect(neither.vendorRequest(SET_ID, { method: 'GET', path: resource('x') })).rejects.toMatchObject(
      {
        code: 'CONFIGURATION_INVALID',
        message: expect.stringContaining(`vendorBaseUrls.${SET_ID}`),
      },
    );
  });
});
