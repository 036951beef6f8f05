import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import {
  fullJitterDelayMs,
  InsecureVendorUrlError,
  isResourcePath,
  parseRateLimitHeaders,
  parseVendorBaseUrl,
  readTokenTimes,
  redactSecrets,
  resolveRetrySettings,
  toVendorError,
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorClient,
  VendorRateLimitError,
  VendorTokenUnusableError,
  VendorUnreachableError,
  withRetry,
} from '../shared/vendor-client/index.js';

const NOW = Date.UTC(2026, 0, 5, 9, 0, 0);
const nowSeconds = NOW / 1000;
const key = new TextEncoder().encode('unit-test-signing-key-of-enough-length');
const mint = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(key);

describe('vendor base URL', () => {
  it.each([
    ['https://vendor.example.com/api/', 'https://vendor.example.com/api'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['http://127.9.8.7/', 'http://127.9.8.7'],
    ['http://localhost:3000/base', 'http://localhost:3000/base'],
    ['http://[::1]:4000', 'http://[::1]:4000'],
  ])('accepts %s', (input, normalised) => {
    expect(parseVendorBaseUrl(input)).toBe(normalised);
    expect(new VendorClient({ baseUrl: input }).baseUrl).toBe(normalised);
  });

  it.each([
    'http://vendor.example.com',
    'http://10.0.0.1',
    'http://128.0.0.1',
    'http://localhost.evil.example',
    'http://127.0.0.1.nip.io',
    'ftp://127.0.0.1',
    'not a url',
    'https://user:pw@vendor.example.com',
    'https://vendor.example.com/?a=b',
  ])('refuses %s at construction', (input) => {
    expect(() => new VendorClient({ baseUrl: input })).toThrow(InsecureVendorUrlError);
  });

  it('refuses bad timeouts and retry settings with a message naming them', () => {
    expect(() => new VendorClient({ baseUrl: 'https://v.example', timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => resolveRetrySettings({ maxAttempts: 0 })).toThrow(ConfigurationError);
    expect(() => resolveRetrySettings({ budgetMs: -1, baseDelayMs: Number.NaN })).toThrow(
      /baseDelayMs.*budgetMs/,
    );
  });
});

describe('resource path shape', () => {
  it.each(['/users/1/acme/serviceKey/C-42', '/users/007/tenant.a_b~c/serviceKey/key-1'])('accepts %s', (p) =>
    expect(isResourcePath(p)).toBe(true),
  );
  it.each([
    '/users/x/acme/serviceKey/k',
    '/users/1/acme/externalKey/k',
    '/users/1/../serviceKey/k',
    '/users/1/acme/serviceKey/..',
    '/users/1/acme/serviceKey/k?x=1',
    '/users/1/acme/serviceKey/k#f',
    '/users/1/ac%2Fme/serviceKey/k',
    '/users/1/acme/serviceKey/k/extra',
    'users/1/acme/serviceKey/k',
    '/restful/login/',
    // Other endpoints (reports, rebalancing) only as the paths of a configured class: isSafeVendorPath.
    '/reports/monthly/r-1',
    '/reports/../users/1/acme/serviceKey/k',
    '/reports/r-1?x=1',
    '/reports//r-1',
    '/reports/..',
    '/reports/./r-1',
    '/',
  ])('refuses %s', (p) => expect(isResourcePath(p)).toBe(false));
});

describe('full-jitter backoff', () => {
  it('stays in [0, min(cap, base·2^n)] and reaches both ends', () => {
    const settings = resolveRetrySettings({ baseDelayMs: 100, maxDelayMs: 1000 });
    const at = (r: number, n: number) => fullJitterDelayMs(n, { ...settings, random: () => r });
    expect([0, 1, 2, 3, 4, 10].map((n) => at(0.999_999_9, n))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect([0, 3, 10].map((n) => at(0, n))).toEqual([0, 0, 0]);
    expect(at(0.5, 2)).toBe(200);
  });

  it('gives up when the next wait would overrun the budget, throwing the last error', async () => {
    const clock = new ManualClock(NOW, { autoAdvance: true });
    const errors = [1, 2, 3, 4].map((n) => new VendorUnreachableError(`failure ${n}`, undefined));
    let attempts = 0;
    const run = withRetry(
      async () => {
        throw errors[attempts++];
      },
      // Waits of 400, 800, 1600 (random≈1): 400+800 fit in 1500, 1600 more would not.
      { clock, settings: { baseDelayMs: 400, maxDelayMs: 10_000, budgetMs: 1500, random: () => 0.9999 } },
    );
    await expect(run).rejects.toBe(errors[2]);
    expect(attempts).toBe(3);
    expect(clock.now() - NOW).toBe(1200);
  });
});

describe('error bodies', () => {
  const answer = (status: number, body: string, headers: Record<string, string> = {}) =>
    toVendorError({ status, headers: new Headers(headers), text: body }, NOW);

  it('reads the flat §7 body, with requestId from the body or else the X-Request-Id header', () => {
    const body = { errorStatus: 404, errorCode: 'RESOURCE_NOT_FOUND', errorMessage: 'no such client' };
    const fromHeader = answer(404, JSON.stringify(body), { 'x-request-id': 'req-h' });
    expect(fromHeader).toBeInstanceOf(VendorApiError);
    expect(fromHeader).toMatchObject({ code: 'RESOURCE_NOT_FOUND', status: 404, requestId: 'req-h' });
    const fromBody = answer(404, JSON.stringify({ ...body, requestId: 'req-b' }), {
      'x-request-id': 'req-h',
    });
    expect(fromBody).toMatchObject({ requestId: 'req-b' });
  });

  it('reads Retry-After given as an HTTP-date against the vendor Date header', () => {
    const headers = new Headers({
      date: new Date(NOW).toUTCString(),
      'retry-after': new Date(NOW + 30_000).toUTCString(),
      'x-ratelimit-limit': '50',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(nowSeconds + 30),
    });
    // Our clock is an hour off the vendor's: the wait must still be the vendor's 30 s.
    expect(parseRateLimitHeaders(headers, NOW + 3_600_000)).toEqual({
      limit: 50,
      remaining: 0,
      reset: nowSeconds + 30,
      retryAfterSeconds: 30,
    });
  });

  it('treats a 429 of the flat shape as a rate-limit error too, and a proxy 429 page as retryable', () => {
    const flat = answer(
      429,
      JSON.stringify({ errorCode: 'RATE_LIMIT_EXCEEDED', errorMessage: 'slow down' }),
      {
        'retry-after': '7',
      },
    );
    expect(flat).toBeInstanceOf(VendorRateLimitError);
    expect(flat).toMatchObject({ retryAfterSeconds: 7, vendorMessage: 'slow down' });
    const page = answer(429, '<html>busy</html>', { 'retry-after': '3' });
    expect(page).toBeInstanceOf(UnexpectedVendorResponseError);
    expect(page).toMatchObject({ status: 429, retryable: true, retryAfterSeconds: 3 });
  });

  it('redacts secrets in raw and JSON-escaped spelling', () => {
    const secret = 'pa"ss\\word';
    const text = JSON.stringify({ errorMessage: `bad password ${secret}` });
    expect(redactSecrets(text, [secret])).not.toContain(JSON.stringify(secret).slice(1, -1));
    expect(JSON.parse(redactSecrets(text, [secret])).errorMessage).toBe('bad password [REDACTED]');
  });
});

describe('token expiry', () => {
  it('takes the earlier of body and JWT exp, and reads env and iat', async () => {
    const token = await mint({ exp: nowSeconds + 3600, iat: nowSeconds, env: 'uat' });
    expect(readTokenTimes(token, nowSeconds + 600, NOW)).toEqual({
      exp: nowSeconds + 600,
      env: 'uat',
      issuedAt: nowSeconds,
    });
    expect(readTokenTimes(token, nowSeconds + 7200, NOW).exp).toBe(nowSeconds + 3600);
    expect(readTokenTimes(token, 'soon', NOW).exp).toBe(nowSeconds + 3600);
  });

  it('refuses a token without a usable exp, an expired one, and a malformed JWT', async () => {
    const noExp = await mint({ env: 'uat' });
    expect(() => readTokenTimes(noExp, undefined, NOW)).toThrow(VendorTokenUnusableError);
    expect(() => readTokenTimes(noExp, 'tomorrow', NOW)).toThrow(/no usable exp/);
    const stringExp = await mint({ exp: String(nowSeconds + 60) });
    expect(() => readTokenTimes(stringExp, null, NOW)).toThrow(/no usable exp/);
    const expired = await mint({ exp: nowSeconds + 60 });
    expect(() => readTokenTimes(expired, nowSeconds, NOW)).toThrow(/already expired/);
    expect(() => readTokenTimes('not-a-jwt', nowSeconds + 60, NOW)).toThrow(/not a well-formed JWT/);
  });
});
