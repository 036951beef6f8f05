import { decodeJwt } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { type Sandbox, type SandboxLimit, startSandbox, type WindowKind } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { call, type Reply, seededRandom, tokenFor } from './support/sandbox-http.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0); // aligned to 10 s, 60 s and 3600 s
const T0 = START / 1000;
const PATH = '/users/7/uat-advisor-tenant/serviceKey/c-1';

const headersOf = (reply: Reply) => ({
  limit: Number(reply.headers.get('x-ratelimit-limit')),
  remaining: Number(reply.headers.get('x-ratelimit-remaining')),
  reset: Number(reply.headers.get('x-ratelimit-reset')),
});

/** The most successes inside any span [t, t + W) of the given timestamps. */
function busiestSpan(times: number[], windowMs: number): number {
  let best = 0;
  for (const [i, t] of times.entries()) {
    best = Math.max(best, times.slice(i).filter((u) => u < t + windowMs).length);
  }
  return best;
}

describe('vendor sandbox: rate limits', () => {
  let clock: ManualClock;
  let sandbox: Sandbox | undefined;

  async function start(limits: SandboxLimit[], windowKind: WindowKind = 'fixed') {
    clock = new ManualClock(START);
    sandbox = await startSandbox({ environment: 'uat', clock, limits, windowKind, quiet: true });
    const token = await tokenFor(sandbox.url, 'uat-advisor', 'uat-advisor-sandbox-pw');
    const get = () => call(sandbox?.url ?? '', 'GET', PATH, { token });
    return { sandbox, token, get };
  }
  afterEach(async () => {
    await sandbox?.close();
    sandbox = undefined;
  });

  it('reports the most constrained window in X-RateLimit-* and answers 429 with Retry-After and the §8 body', async () => {
    const { sandbox, token, get } = await start([
      { limit: 5, windowSeconds: 10 },
      { limit: 8, windowSeconds: 60 },
    ]);
    await clock.advance(2_000);
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const reply = await get();
      expect(reply.status).toBe(404); // authenticated answers carry the headers, errors included
      expect(headersOf(reply)).toMatchObject({ limit: 5, reset: T0 + 10 });
      remaining.push(headersOf(reply).remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);

    const limited = await get();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('8');
    expect(headersOf(limited)).toEqual({ limit: 5, remaining: 0, reset: T0 + 10 });
    expect(limited.body).toEqual({
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: expect.any(String),
        details: { limit: 5, reset: T0 + 10 },
      },
    });

    await clock.advance(8_500); // 10.5 s: a new 10 s window; the 60 s window holds 5 of 8
    expect(headersOf(await get())).toEqual({ limit: 8, remaining: 2, reset: T0 + 60 });
    await get();
    expect(headersOf(await get())).toEqual({ limit: 8, remaining: 0, reset: T0 + 60 });
    const hourly = await get();
    expect([hourly.status, hourly.headers.get('retry-after'), hourly.body.error.details]).toEqual([
      429,
      '50',
      { limit: 8, reset: T0 + 60 },
    ]);

    const stats = sandbox.stats();
    expect(stats.requestsByToken).toEqual({ [String(decodeJwt(token).jti)]: 8 });
    expect(stats.errorsByCode.RATE_LIMIT_EXCEEDED).toBe(2);
    expect(stats.responsesByStatus).toMatchObject({ '404': 8, '429': 2 });
  });

  it('rounds Retry-After up, and never below 1 s', async () => {
    const { get } = await start([{ limit: 1, windowSeconds: 10 }]);
    await clock.advance(1_500);
    await get();
    expect((await get()).headers.get('retry-after')).toBe('9');
    await clock.advance(8_300); // 0.2 s before the window ends
    expect((await get()).headers.get('retry-after')).toBe('1');
  });

  it('fixed windows admit twice the limit across a boundary within one window span', async () => {
    const { get } = await start([{ limit: 5, windowSeconds: 10 }], 'fixed');
    await clock.advance(9_000);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await get()).status);
    await clock.advance(1_000); // the next aligned window
    for (let i = 0; i < 6; i++) statuses.push((await get()).status);
    expect(statuses.filter((s) => s === 404)).toHaveLength(10); // ten within one second
    expect(statuses).toEqual([404, 404, 404, 404, 404, 429, 404, 404, 404, 404, 404, 429]);
  });

  it('sliding windows never admit more than the limit in any window span', async () => {
    const { get } = await start([{ limit: 5, windowSeconds: 10 }], 'sliding');
    await clock.advance(9_000);
    for (let i = 0; i < 5; i++) expect((await get()).status).toBe(404);
    await clock.advance(1_000);
    const limited = await get();
    expect([limited.status, limited.headers.get('retry-after')]).toEqual([429, '9']);
    expect(headersOf(limited).reset).toBe(T0 + 19);
    await clock.advance(8_999);
    expect((await get()).status).toBe(429);
    await clock.advance(1);
    const room = await get();
    // All five aged out together; the window now holds only this request.
    expect([room.status, headersOf(room)]).toEqual([404, { limit: 5, remaining: 4, reset: T0 + 29 }]);
  });

  it('under a seeded bursty load: sliding holds the bound in every span, fixed does not', async () => {
    const busiest: Record<string, number> = {};
    for (const kind of ['fixed', 'sliding'] as const) {
      const { get } = await start([{ limit: 5, windowSeconds: 10 }], kind);
      const random = seededRandom(20_260_105);
      const admitted: number[] = [];
      for (let step = 0; step < 150; step++) {
        await clock.advance(Math.floor(random() * 3_000));
        const burst = 1 + Math.floor(random() * 3);
        for (let i = 0; i < burst; i++) if ((await get()).status === 404) admitted.push(clock.now());
      }
      busiest[kind] = busiestSpan(admitted, 10_000);
      await sandbox?.close();
      sandbox = undefined;
    }
    expect(busiest.sliding).toBe(5);
    expect(busiest.fixed).toBeGreaterThan(5);
    expect(busiest.fixed).toBeLessThanOrEqual(10);
  });

  it('does not count requests the limiter rejected', async () => {
    const { get } = await start([{ limit: 2, windowSeconds: 10 }], 'sliding');
    await get();
    await get();
    await clock.advance(5_000);
    expect((await get()).status).toBe(429);
    await clock.advance(5_000); // the first two age out; the rejected one never counted
    expect(headersOf(await get()).remaining).toBe(1);
  });

  it('keeps one quota per token, and counts nothing for requests that fail auth', async () => {
    const { sandbox, get } = await start([{ limit: 2, windowSeconds: 60 }]);
    await get();
    await get();
    expect((await get()).status).toBe(429);
    const other = await tokenFor(sandbox.url, 'uat-advisor', 'uat-advisor-sandbox-pw');
    const fresh = await call(sandbox.url, 'GET', PATH, { token: other });
    expect([fresh.status, headersOf(fresh).remaining]).toEqual([404, 1]);
    const unauthenticated = await call(sandbox.url, 'GET', PATH, { token: 'not-a-token' });
    expect([unauthenticated.status, unauthenticated.headers.get('x-ratelimit-limit')]).toEqual([401, null]);
    expect(Object.values(sandbox.stats().requestsByToken).sort()).toEqual([1, 2]);
  });

  it('sends no rate-limit headers and never 429 when no limits are configured', async () => {
    const { get } = await start([]);
    for (let i = 0; i < 60; i++) {
      const reply = await get();
      expect([reply.status, reply.headers.get('x-ratelimit-limit')]).toEqual([404, null]);
    }
  });
});
