import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import { call, login, seededRandom, tokenFor } from './support/sandbox-http.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const PATH = '/users/7/uat-advisor-tenant/serviceKey/c-1';
const USER = ['uat-advisor', 'uat-advisor-sandbox-pw'] as const;

describe('vendor sandbox: outages, faults, failures, latency and clock offset', () => {
  const clock = new ManualClock(START);
  let sandbox: Sandbox;
  let token: string;

  beforeAll(async () => {
    sandbox = await startSandbox({ environment: 'uat', clock, quiet: true });
    token = await tokenFor(sandbox.url, ...USER);
  });
  afterAll(() => sandbox.close());
  afterEach(() => {
    sandbox.update({ outage: false, failureRate: 0, latencyMs: 0, clockOffsetSeconds: 0 });
    clock.set(START);
  });

  it('answers 503 to everything but /_sandbox/* during an outage, switched on and off while running', async () => {
    sandbox.update({ outage: true });
    for (const reply of [
      await login(sandbox.url, ...USER),
      await call(sandbox.url, 'GET', PATH, { token }),
    ]) {
      expect(reply.status).toBe(503);
      expect(reply.body).toMatchObject({
        errorStatus: 503,
        errorCode: 'SERVICE_UNAVAILABLE',
        requestId: expect.any(String),
      });
    }
    expect((await call(sandbox.url, 'GET', '/_sandbox/stats')).status).toBe(200);
    const off = await call(sandbox.url, 'POST', '/_sandbox/settings', { body: { outage: false } });
    expect([off.status, off.body.settings.outage]).toEqual([200, false]);
    expect((await call(sandbox.url, 'GET', PATH, { token })).status).toBe(404);
    await call(sandbox.url, 'POST', '/_sandbox/settings', { body: { outage: true } });
    expect((await login(sandbox.url, ...USER)).status).toBe(503);
  });

  it('answers injected error codes with their documented status, count times, before auth', async () => {
    sandbox.inject({ errorCode: 'TOKEN_EXPIRED', target: 'resources', count: 2 });
    for (let i = 0; i < 2; i++) {
      const reply = await call(sandbox.url, 'GET', PATH); // no token at all: the fault answers first
      expect(reply.body).toMatchObject({ errorStatus: 401, errorCode: 'TOKEN_EXPIRED' });
    }
    expect((await call(sandbox.url, 'GET', PATH)).body.errorCode).toBe('TOKEN_MISSING');

    sandbox.inject({ errorCode: 'GUIDELINE_VIOLATION' });
    const guideline = await call(sandbox.url, 'GET', PATH, { token });
    expect(guideline.status).toBe(422);
    expect(guideline.body.details.violations[0]).toEqual({
      rule: expect.any(String),
      current_value: expect.any(Number),
      limit: expect.any(Number),
    });
  });

  it('aims faults at login or resources only when told to', async () => {
    sandbox.inject({ target: 'login', status: 500 });
    expect((await call(sandbox.url, 'GET', PATH, { token })).status).toBe(404);
    const failed = await login(sandbox.url, ...USER);
    expect([failed.status, failed.body.errorCode]).toEqual([500, 'INTERNAL_ERROR']);
    expect((await login(sandbox.url, ...USER)).status).toBe(200);
  });

  it('injects a 429 in the §8 shape with Retry-After, and generic 5xx bodies', async () => {
    clock.set(START + 45_000);
    sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED' });
    const limited = await call(sandbox.url, 'GET', PATH, { token });
    expect([limited.status, limited.headers.get('retry-after')]).toEqual([429, '15']);
    expect(limited.body).toEqual({
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: expect.any(String),
        details: { limit: 50, reset: START / 1000 + 60 },
      },
    });
    for (const [status, code] of [
      [502, 'BAD_GATEWAY'],
      [503, 'SERVICE_UNAVAILABLE'],
      [504, 'GATEWAY_TIMEOUT'],
    ] as const) {
      sandbox.inject({ status });
      const reply = await call(sandbox.url, 'GET', PATH, { token });
      expect(reply.body).toEqual({
        errorStatus: status,
        errorCode: code,
        errorMessage: expect.any(String),
        timestamp: new Date(START + 45_000).toISOString(),
        requestId: reply.headers.get('x-request-id'),
      });
    }
  });

  it('sends raw answers as they are: an HTML 502 from a proxy, JSON of an unknown shape', async () => {
    const html = '<html><body><h1>502 Bad Gateway</h1></body></html>';
    sandbox.inject({ raw: { status: 502, body: html, contentType: 'text/html' } });
    const proxy = await call(sandbox.url, 'POST', '/restful/login/', {
      body: { username: USER[0], password: USER[1] },
    });
    expect([proxy.status, proxy.text, proxy.headers.get('content-type')]).toEqual([502, html, 'text/html']);
    expect(proxy.headers.get('x-request-id')).toBeNull();

    const odd = await call(sandbox.url, 'POST', '/_sandbox/faults', {
      body: { raw: { status: 400, body: '{"message":"odd"}', contentType: 'application/json' } },
    });
    expect([odd.status, odd.body]).toEqual([201, { pendingFaults: 1 }]);
    const reply = await call(sandbox.url, 'GET', PATH, { token });
    expect([reply.status, reply.body]).toEqual([400, { message: 'odd' }]);
  });

  it('fails the seeded fraction of requests with statuses drawn from failureStatuses', async () => {
    const seed = 99;
    const failing = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      random: seededRandom(seed),
      failureStatuses: [502, 504],
      limits: [],
    });
    try {
      // No draws while failureRate is 0, so the seeded sequence starts with the first request below.
      const failingToken = await tokenFor(failing.url, ...USER);
      failing.update({ failureRate: 0.4 });
      const draws = seededRandom(seed);
      // The same draws the sandbox makes: one decides, a second picks the status.
      const predicted = Array.from({ length: 40 }, () =>
        draws() < 0.4 ? [502, 504][Math.floor(draws() * 2)] : 404,
      );
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++)
        statuses.push((await call(failing.url, 'GET', PATH, { token: failingToken })).status);
      expect(statuses).toEqual(predicted);
      expect(new Set(statuses)).toEqual(new Set([404, 502, 504]));
      const failures = statuses.filter((s) => s !== 404).length;
      expect(failing.stats().errorsByCode).toEqual({
        RESOURCE_NOT_FOUND: 40 - failures,
        BAD_GATEWAY: statuses.filter((s) => s === 502).length,
        GATEWAY_TIMEOUT: statuses.filter((s) => s === 504).length,
      });
      failing.update({ failureRate: 1, failureStatuses: [503] });
      expect((await login(failing.url, ...USER)).status).toBe(503);
    } finally {
      await failing.close();
    }
  });

  it('adds latencyMs of real time to answers', async () => {
    sandbox.update({ latencyMs: 120 });
    const began = performance.now();
    expect((await call(sandbox.url, 'GET', PATH, { token })).status).toBe(404);
    expect(performance.now() - began).toBeGreaterThanOrEqual(115);
  });

  it('runs the vendor clock ahead by clockOffsetSeconds: exp, iat, Date, timestamps and windows', async () => {
    sandbox.update({ clockOffsetSeconds: 90 });
    const vendorNow = START + 90_000;
    const reply = await login(sandbox.url, ...USER);
    expect(reply.body.exp).toBe(vendorNow / 1000 + 14_400);
    expect(reply.headers.get('date')).toBe(new Date(vendorNow).toUTCString());
    const offsetToken = reply.body.accessToken as string;
    const limited = await call(sandbox.url, 'GET', PATH, { token: offsetToken });
    expect(limited.headers.get('x-ratelimit-reset')).toBe(String(START / 1000 + 120)); // window 09:01:00-09:02:00
    const error = await call(sandbox.url, 'GET', PATH);
    expect(error.body.timestamp).toBe(new Date(vendorNow).toISOString());
    // A token whose exp is behind the vendor clock is expired even though the local clock says otherwise.
    sandbox.update({ clockOffsetSeconds: 14_400 });
    expect((await call(sandbox.url, 'GET', PATH, { token })).body.errorCode).toBe('TOKEN_EXPIRED');
  });
});

describe('vendor sandbox: bad settings and operator input', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ environment: 'uat', quiet: true });
  });
  afterAll(() => sandbox.close());

  it('refuses bad settings at start with a ConfigurationError naming the field', async () => {
    for (const [settings, field] of [
      [{ port: 70_000 }, 'port'],
      [{ failureRate: 1.5 }, 'failureRate'],
      [{ limits: [{ limit: 0, windowSeconds: 60 }] }, 'limits.0.limit'],
      [{ windowKind: 'rolling' }, 'windowKind'],
      [{ users: [] }, 'users'],
      [{ tokenLifetimeSeconds: -1 }, 'tokenLifetimeSeconds'],
    ] as const) {
      const started = startSandbox({ environment: 'uat', quiet: true, ...(settings as object) });
      await expect(started).rejects.toBeInstanceOf(ConfigurationError);
      await expect(started).rejects.toThrow(field);
    }
    await expect(startSandbox({ environment: 'staging' as 'uat' })).rejects.toThrow('environment');
  });

  it('refuses bad updates and faults through the API, changing nothing', () => {
    expect(() => sandbox.update({ failureRate: 2 })).toThrow(ConfigurationError);
    expect(() => sandbox.update({ latency: 5 } as object)).toThrow(/latency/);
    expect(() => sandbox.inject({})).toThrow(/exactly one/);
    expect(() => sandbox.inject({ status: 503, errorCode: 'TOKEN_INVALID' })).toThrow(/exactly one/);
    expect(() => sandbox.inject({ errorCode: 'NOPE' as 'TOKEN_INVALID' })).toThrow(/errorCode/);
  });

  it('answers 400 to bad operator input and keeps the settings', async () => {
    const cases: [string, string, number, string][] = [
      ['/_sandbox/settings', '{not json', 400, 'INVALID_FORMAT'],
      ['/_sandbox/settings', '{"failureRate": 2}', 400, 'INVALID_VALUE'],
      ['/_sandbox/settings', '{"outage": "yes"}', 400, 'INVALID_VALUE'],
      ['/_sandbox/settings', '{"users": []}', 400, 'INVALID_VALUE'],
      ['/_sandbox/settings', '[]', 400, 'INVALID_VALUE'],
      ['/_sandbox/faults', '{"count": 0, "status": 500}', 400, 'INVALID_VALUE'],
      ['/_sandbox/faults', '{"status": 200}', 400, 'INVALID_VALUE'],
      ['/_sandbox/faults', '{"target": "everything", "status": 500}', 400, 'INVALID_VALUE'],
      ['/_sandbox/faults', '{"raw": {"status": 502}}', 400, 'INVALID_VALUE'],
    ];
    for (const [target, body, status, code] of cases) {
      const reply = await call(sandbox.url, 'POST', target, { body });
      expect([target, body, reply.status, reply.body.errorCode]).toEqual([target, body, status, code]);
    }
    expect((await call(sandbox.url, 'POST', '/_sandbox/settings', { body: {} })).body.settings).toMatchObject(
      {
        failureRate: 0,
        outage: false,
      },
    );
    expect((await login(sandbox.url, ...USER)).status).toBe(200); // no fault was queued
    expect((await call(sandbox.url, 'GET', '/_sandbox/nothing')).status).toBe(404);
    const wrongMethod = await call(sandbox.url, 'GET', '/_sandbox/settings');
    expect([wrongMethod.status, wrongMethod.headers.get('allow')]).toEqual([405, 'POST']);
  });
});

describe('vendor sandbox: stats', () => {
  const clock = new ManualClock(START);
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ environment: 'prod', clock, quiet: true });
  });
  afterAll(() => sandbox.close());

  it('counts logins, token requests by jti, statuses and error codes; operator calls are not counted', async () => {
    const [username, password] = ['prod-advisor', 'prod-advisor-sandbox-pw'];
    const token = await tokenFor(sandbox.url, username, password);
    await login(sandbox.url, username, 'wrong');
    await call(sandbox.url, 'POST', '/restful/login/', { body: 'not json' });
    sandbox.update({ outage: true });
    await login(sandbox.url, username, password);
    await login(sandbox.url, 'prod-execution', 'prod-execution-sandbox-pw');
    sandbox.update({ outage: false });
    await call(sandbox.url, 'GET', '/users/7/prod-advisor-tenant/serviceKey/k', { token });
    await call(sandbox.url, 'GET', '/users/7/other-tenant/serviceKey/k', { token });
    await call(sandbox.url, 'GET', '/users/7/prod-advisor-tenant/serviceKey/k');

    const jti = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()).jti as string;
    const expected = {
      environment: 'prod',
      loginRequests: 5,
      logins: {
        'prod-advisor': { attempts: 3, successes: 1, failures: 2 },
        'prod-execution': { attempts: 1, successes: 0, failures: 1 },
      },
      resourceRequests: { GET: 3 },
      requestsByToken: { [jti]: 2 },
      responsesByStatus: { '200': 1, '400': 1, '401': 2, '403': 1, '404': 1, '503': 2 },
      errorsByCode: {
        INVALID_CREDENTIALS: 1,
        INVALID_FORMAT: 1,
        SERVICE_UNAVAILABLE: 2,
        RESOURCE_NOT_FOUND: 1,
        WRONG_TENANT: 1,
        TOKEN_MISSING: 1,
      },
      // Both authenticated requests passed the limiter (the wrong tenant is found after it); no family's path.
      rateLimits: { general: { served: 2, refused: 0, refusedByLimit: {} }, families: {} },
    };
    expect(sandbox.stats()).toEqual(expected);
    const overHttp = await call(sandbox.url, 'GET', '/_sandbox/stats');
    expect(overHttp.body).toEqual(expected);
    expect(overHttp.text).not.toContain(token);

    expect((await call(sandbox.url, 'POST', '/_sandbox/reset-stats')).status).toBe(200);
    expect(sandbox.stats()).toEqual({
      environment: 'prod',
      loginRequests: 0,
      logins: {},
      resourceRequests: {},
      requestsByToken: {},
      responsesByStatus: {},
      errorsByCode: {},
      rateLimits: { general: { served: 0, refused: 0, refusedByLimit: {} }, families: {} },
    });
    await login(sandbox.url, username, password);
    sandbox.resetStats();
    expect(sandbox.stats().loginRequests).toBe(0);
  });
});
