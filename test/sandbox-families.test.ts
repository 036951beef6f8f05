import { decodeJwt } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_FAMILIES,
  type Sandbox,
  type SandboxFamily,
  type SandboxSettings,
  startSandbox,
} from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import { call, type Reply, tokenFor } from './support/sandbox-http.js';

/**
 * Endpoint families (issue 24, contract point 4): requests under a family's prefix count against the family's
 * own limits and the general ones, answer with the family's X-RateLimit-* (a general 429 with the general ones),
 * and are counted per family in the stats and the request log. Over real HTTP, on a manual clock.
 */
const START = Date.UTC(2026, 0, 5, 9, 0, 0); // aligned to 10 s, 60 s and 3600 s
const T0 = START / 1000;
const USER = ['uat-advisor', 'uat-advisor-sandbox-pw'] as const;
const RESOURCE = '/users/7/uat-advisor-tenant/serviceKey/c-1';
const REPORT = '/reports/monthly/r-1';
const REBALANCE = '/rebalancing/run-1';

const GENERAL = [{ limit: 6, windowSeconds: 10 }];
const FAMILIES: SandboxFamily[] = [
  { name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 3, windowSeconds: 10 }] },
  {
    name: 'rebalancing',
    pathPrefix: '/rebalancing/',
    limits: [
      { limit: 2, windowSeconds: 10 },
      { limit: 3, windowSeconds: 60 },
    ],
  },
];

const headersOf = (reply: Reply) => ({
  limit: Number(reply.headers.get('x-ratelimit-limit')),
  remaining: Number(reply.headers.get('x-ratelimit-remaining')),
  reset: Number(reply.headers.get('x-ratelimit-reset')),
});

describe('vendor sandbox: endpoint families', () => {
  let clock: ManualClock;
  let sandbox: Sandbox | undefined;

  async function start(settings: Partial<Omit<SandboxSettings, 'environment'>> = {}) {
    clock = new ManualClock(START);
    const started = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      limits: GENERAL,
      families: FAMILIES,
      ...settings,
    });
    sandbox = started;
    const token = await tokenFor(started.url, ...USER);
    const send = (method: string, path: string, options: Parameters<typeof call>[3] = {}) =>
      call(started.url, method, path, { token, ...options });
    return { sandbox: started, token, send };
  }
  afterEach(async () => {
    await sandbox?.close();
    sandbox = undefined;
  });

  it('answers GET, POST, PUT and DELETE under a family prefix after auth, with a small JSON body', async () => {
    const { sandbox, send } = await start({
      limits: [],
      families: FAMILIES.map((f) => ({ ...f, limits: [] })),
    });
    const answers = [];
    for (const method of ['GET', 'POST', 'PUT', 'DELETE']) {
      const reply = await send(
        method,
        REPORT,
        method === 'POST' || method === 'PUT' ? { body: { a: 1 } } : {},
      );
      answers.push([reply.status, reply.body]);
    }
    expect(answers).toEqual([
      [200, { family: 'reports', path: REPORT, status: 'ready' }],
      [201, { family: 'reports', path: REPORT, status: 'queued' }],
      [200, { family: 'reports', path: REPORT, status: 'updated' }],
      [200, { family: 'reports', path: REPORT, status: 'cancelled' }],
    ]);
    expect((await send('GET', REBALANCE)).body).toEqual({
      family: 'rebalancing',
      path: REBALANCE,
      status: 'ready',
    });
    expect((await send('PATCH', REPORT)).body.errorCode).toBe('RESOURCE_NOT_FOUND');
    expect((await send('POST', REPORT, { body: '{nope' })).body.errorCode).toBe('INVALID_FORMAT');
    // Auth first: no token, no answer and nothing counted.
    const anonymous = await call(sandbox.url, 'GET', REPORT);
    expect([anonymous.status, anonymous.body.errorCode]).toEqual([401, 'TOKEN_MISSING']);
    // The prefix is a whole segment: /reportsX/ is no family's (a plain 404 of the resource routes).
    expect((await send('GET', '/reportsX/r-1')).body.errorCode).toBe('RESOURCE_NOT_FOUND');
    expect(sandbox.stats().rateLimits.families).toEqual({
      reports: { served: 6, refused: 0, refusedByLimit: {} },
      rebalancing: { served: 1, refused: 0, refusedByLimit: {} },
    });
  });

  it("answers a family's request with its most constrained family window, a general one with the general", async () => {
    const { send } = await start();
    expect(headersOf(await send('GET', REPORT))).toEqual({ limit: 3, remaining: 2, reset: T0 + 10 });
    // The general window counted the report too.
    expect(headersOf(await send('GET', RESOURCE))).toEqual({ limit: 6, remaining: 4, reset: T0 + 10 });
    // Rebalancing: 2/10 s and 3/60 s; after one, both have one... then the 60 s one is tighter.
    expect(headersOf(await send('GET', REBALANCE))).toEqual({ limit: 2, remaining: 1, reset: T0 + 10 });
    await clock.advance(10_000);
    expect(headersOf(await send('GET', REBALANCE))).toEqual({ limit: 3, remaining: 1, reset: T0 + 60 });
  });

  it('answers a family 429 with the family limit, the §8 body and Retry-After, and counts it nowhere', async () => {
    const { sandbox, send } = await start();
    await clock.advance(2_000);
    for (let i = 0; i < 3; i++) expect((await send('GET', REPORT)).status).toBe(200);
    const limited = await send('GET', REPORT);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('8');
    expect(headersOf(limited)).toEqual({ limit: 3, remaining: 0, reset: T0 + 10 });
    expect(limited.body).toEqual({
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: expect.any(String),
        details: { limit: 3, reset: T0 + 10 },
      },
    });
    // The refused report did not count in the general window: 3 of 6 used, so 3 general requests pass.
    for (let i = 0; i < 3; i++) expect((await send('GET', RESOURCE)).status).toBe(404);
    const general = await send('GET', RESOURCE);
    expect([general.status, headersOf(general).limit]).toEqual([429, 6]);
    // Another family has room of its own, but no general room: the general limit refuses, with its headers.
    const rebalance = await send('GET', REBALANCE);
    expect([rebalance.status, headersOf(rebalance), rebalance.body.error.details]).toEqual([
      429,
      { limit: 6, remaining: 0, reset: T0 + 10 },
      { limit: 6, reset: T0 + 10 },
    ]);
    expect(sandbox.stats().rateLimits).toEqual({
      general: { served: 6, refused: 2, refusedByLimit: { '6/10s': 2 } },
      families: {
        reports: { served: 3, refused: 1, refusedByLimit: { '3/10s': 1 } },
        rebalancing: { served: 0, refused: 1, refusedByLimit: { 'general 6/10s': 1 } },
      },
    });
    expect(sandbox.stats().errorsByCode.RATE_LIMIT_EXCEEDED).toBe(3);
  });

  it('names the limit with room latest when a family and a general limit both refuse', async () => {
    const { send } = await start({
      limits: [{ limit: 2, windowSeconds: 60 }],
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 2, windowSeconds: 10 }] }],
    });
    await send('GET', REPORT);
    await send('GET', REPORT);
    const both = await send('GET', REPORT);
    expect([both.status, both.headers.get('retry-after'), headersOf(both).reset]).toEqual([
      429,
      '60',
      T0 + 60,
    ]);
  });

  it.each([
    ['fixed', 10],
    ['sliding', 5],
  ] as const)('keeps %s windows for the families as for the general limits', async (windowKind, admitted) => {
    const { send } = await start({
      windowKind,
      limits: [],
      families: [{ name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 5, windowSeconds: 10 }] }],
    });
    await clock.advance(9_000);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await send('GET', REPORT)).status);
    await clock.advance(1_000); // the next aligned window: a fixed one starts over, a sliding one does not
    for (let i = 0; i < 6; i++) statuses.push((await send('GET', REPORT)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(admitted);
  });

  it.each([
    ['token', [3, 0]],
    ['user', [0, 3]],
  ] as const)(
    'counts a family per %s, as rateLimitScope says',
    async (rateLimitScope, secondServedRefused) => {
      const { sandbox, send } = await start({ rateLimitScope, limits: [] });
      for (let i = 0; i < 3; i++) await send('GET', REPORT);
      const second = await tokenFor(sandbox.url, ...USER);
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await call(sandbox.url, 'GET', REPORT, { token: second })).status);
      const refused = statuses.filter((s) => s === 429).length;
      // Per token the second token has a fresh 3; per user both tokens share the 3 the first one used.
      expect([3 - refused, refused]).toEqual(secondServedRefused);
    },
  );

  it('logs every rate-limited outcome while recordRequests is on, and resets it with the stats', async () => {
    const { sandbox, token, send } = await start({ recordRequests: true });
    await send('GET', RESOURCE);
    await clock.advance(1_000);
    for (let i = 0; i < 4; i++) await send('GET', REPORT);
    const jti = String(decodeJwt(token).jti);
    const log = sandbox.requestLog();
    expect(log.map(({ requestId: _, ...entry }) => entry)).toEqual([
      { at: START, quotaKey: jti, served: true },
      ...[1, 2, 3].map(() => ({ at: START + 1_000, quotaKey: jti, family: 'reports', served: true })),
      {
        at: START + 1_000,
        quotaKey: jti,
        family: 'reports',
        served: false,
        refusedBy: { family: 'reports', limit: 3, windowSeconds: 10 },
      },
    ]);
    expect(log.every((entry) => /^req-[0-9a-f]{16}$/.test(entry.requestId))).toBe(true);
    sandbox.update({ recordRequests: false });
    await send('GET', RESOURCE);
    expect(sandbox.requestLog()).toHaveLength(5);
    sandbox.resetStats();
    expect(sandbox.requestLog()).toEqual([]);
  });

  it('ships reports and rebalancing below the general limits, and takes families from the operator API', async () => {
    const { sandbox, send } = await start({ limits: undefined, families: undefined });
    const shown = await call(sandbox.url, 'POST', '/_sandbox/settings', { body: {} });
    expect(shown.body.settings.families).toEqual(DEFAULT_FAMILIES);
    expect(DEFAULT_FAMILIES.map((f) => [f.name, f.pathPrefix, f.limits])).toEqual([
      [
        'reports',
        '/reports/',
        [
          { limit: 10, windowSeconds: 60 },
          { limit: 60, windowSeconds: 3600 },
        ],
      ],
      [
        'rebalancing',
        '/rebalancing/',
        [
          { limit: 4, windowSeconds: 60 },
          { limit: 20, windowSeconds: 3600 },
        ],
      ],
    ]);
    expect(headersOf(await send('GET', REPORT))).toMatchObject({ limit: 10, remaining: 9 });

    const exports = [
      { name: 'exports', pathPrefix: '/exports/v1/', limits: [{ limit: 1, windowSeconds: 60 }] },
    ];
    const updated = await call(sandbox.url, 'POST', '/_sandbox/settings', { body: { families: exports } });
    expect([updated.status, updated.body.settings.families]).toEqual([200, exports]);
    expect((await send('GET', '/exports/v1/e-1')).status).toBe(200);
    expect((await send('GET', '/exports/v1/e-1')).status).toBe(429);
    // No longer a family: /reports/ is an unknown path of the resource routes.
    expect((await send('GET', REPORT)).status).toBe(404);
    await call(sandbox.url, 'POST', '/_sandbox/settings', { body: { families: [] } });
    expect((await send('GET', '/exports/v1/e-1')).status).toBe(404);
  });

  it('refuses bad families at start and through the API with the field named, changing nothing', async () => {
    const family = (extra: object) => ({ name: 'reports', pathPrefix: '/reports/', limits: [], ...extra });
    const cases: [unknown, string][] = [
      [[family({ pathPrefix: 'reports/' })], 'families.0.pathPrefix'],
      [[family({ pathPrefix: '/reports' })], 'families.0.pathPrefix'],
      [[family({ pathPrefix: '/re ports/' })], 'families.0.pathPrefix'],
      [[family({ pathPrefix: '/_sandbox/x/' })], 'families.0.pathPrefix'],
      [[family({ name: 'Reports' })], 'families.0.name'],
      [[family({ limits: [{ limit: 0, windowSeconds: 60 }] })], 'families.0.limits.0.limit'],
      [[family({ extra: true })], 'families.0'],
      [[family({}), family({ pathPrefix: '/other/' })], 'families.1.name'],
      [[family({}), family({ name: 'deep', pathPrefix: '/reports/deep/' })], 'families.1.pathPrefix'],
      [
        [family({ name: 'outer', pathPrefix: '/a/b/' }), family({ pathPrefix: '/a/' })],
        'families.1.pathPrefix',
      ],
      [family({}), 'families'],
    ];
    for (const [families, field] of cases) {
      const started = startSandbox({ environment: 'uat', quiet: true, families } as SandboxSettings);
      await expect(started).rejects.toBeInstanceOf(ConfigurationError);
      await expect(started).rejects.toThrow(field);
    }
    const { sandbox: running } = await start();
    for (const [families, field] of cases) {
      const reply = await call(running.url, 'POST', '/_sandbox/settings', { body: { families } });
      expect([reply.status, reply.body.errorCode, reply.body.errorMessage]).toEqual([
        400,
        'INVALID_VALUE',
        expect.stringContaining(field),
      ]);
    }
    const view = await call(running.url, 'POST', '/_sandbox/settings', { body: {} });
    expect(view.body.settings.families).toEqual(FAMILIES);
  });
});
