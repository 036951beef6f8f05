import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import {
  InvalidResourcePathError,
  InvalidVendorRequestError,
  UnexpectedVendorResponseError,
  VENDOR_ERROR_CODES,
  VendorApiError,
  VendorClient,
  type VendorErrorCode,
  VendorRateLimitError,
} from '../shared/vendor-client/index.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const user = defaultSandboxUsers('uat').find((u) => u.username === 'uat-advisor');
if (!user) throw new Error('the sandbox has no uat-advisor user');
const credentials = { username: user.username, password: user.password };

/** vendor-api.md §7, the documented status of every errorCode. */
const DOCUMENTED_STATUS: Record<VendorErrorCode, number> = {
  INVALID_CREDENTIALS: 401,
  TOKEN_EXPIRED: 401,
  TOKEN_INVALID: 401,
  TOKEN_MISSING: 401,
  INSUFFICIENT_PERMISSIONS: 403,
  WRONG_TENANT: 403,
  RESOURCE_ACCESS_DENIED: 403,
  MISSING_REQUIRED_FIELD: 400,
  INVALID_FORMAT: 400,
  INVALID_VALUE: 400,
  DUPLICATE_KEY: 409,
  GUIDELINE_VIOLATION: 422,
  INSUFFICIENT_BALANCE: 422,
  INVALID_STATE_TRANSITION: 422,
  DEPENDENCY_MISSING: 422,
  RESOURCE_NOT_FOUND: 404,
  RESOURCE_DELETED: 410,
  RATE_LIMIT_EXCEEDED: 429,
};

let clock: ManualClock;
let sandbox: Sandbox;
let client: VendorClient;
let token: string;
let keySeq = 0;
const path = (key = `K-${++keySeq}`, tenant = user.tenant) => `/users/1/${tenant}/serviceKey/${key}`;
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
const answersServed = () => Object.values(sandbox.stats().responsesByStatus).reduce((a, b) => a + b, 0);

beforeAll(async () => {
  clock = new ManualClock(START, { autoAdvance: true });
  sandbox = await startSandbox({ environment: 'uat', clock, quiet: true });
  client = new VendorClient({ baseUrl: sandbox.url, clock });
  token = (await client.login(credentials)).accessToken;
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.resetStats());

describe('every errorCode of §7 becomes a typed error', () => {
  it.each(VENDOR_ERROR_CODES.map((code) => [code]))('%s', async (code) => {
    sandbox.inject({ target: 'resources', errorCode: code });
    const error = await failure(client.request({ method: 'GET', path: path(), token, retry: false }));
    expect(error).toBeInstanceOf(code === 'RATE_LIMIT_EXCEEDED' ? VendorRateLimitError : VendorApiError);
    expect(error).toMatchObject({ code, status: DOCUMENTED_STATUS[code] });
    const apiError = error as VendorApiError;
    expect(apiError.vendorMessage).not.toBe('');
    expect(apiError.requestId).toMatch(/^req-/);
    if (code === 'RATE_LIMIT_EXCEEDED') {
      // The nested §8 shape: no timestamp, the limit and reset from its details and headers.
      const rateError = error as VendorRateLimitError;
      expect(rateError.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(rateError.limit).toBe(50);
      expect(rateError.reset).toBeGreaterThan(START / 1000);
      expect(rateError.rateLimit).toMatchObject({ limit: 50, remaining: 0, reset: rateError.reset });
    } else {
      expect(apiError.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  it('keeps the details of a guideline violation', async () => {
    sandbox.inject({ target: 'resources', errorCode: 'GUIDELINE_VIOLATION' });
    const error = (await failure(
      client.request({ method: 'PUT', path: path(), token, body: {} }),
    )) as VendorApiError;
    expect(error.details).toEqual({
      violations: [
        expect.objectContaining({
          rule: expect.any(String),
          current_value: expect.anything(),
          limit: expect.anything(),
        }),
      ],
    });
    expect(sandbox.stats().responsesByStatus).toEqual({ 422: 1 });
  });
});

describe('errors the sandbox produces by itself', () => {
  it('TOKEN_INVALID, TOKEN_EXPIRED, WRONG_TENANT, RESOURCE_NOT_FOUND, DUPLICATE_KEY, RESOURCE_DELETED, INVALID_FORMAT', async () => {
    const codeOf = async (promise: Promise<unknown>) => ((await failure(promise)) as VendorApiError).code;
    expect(await codeOf(client.request({ method: 'GET', path: path(), token: 'not.a.jwt' }))).toBe(
      'TOKEN_INVALID',
    );
    expect(
      await codeOf(client.request({ method: 'GET', path: path(undefined, 'other-tenant'), token })),
    ).toBe('WRONG_TENANT');
    expect(await codeOf(client.request({ method: 'GET', path: path(), token }))).toBe('RESOURCE_NOT_FOUND');
    const key = path();
    await client.request({ method: 'POST', path: key, token, body: { name: 'a' } });
    expect(await codeOf(client.request({ method: 'POST', path: key, token, body: { name: 'b' } }))).toBe(
      'DUPLICATE_KEY',
    );
    await client.request({ method: 'DELETE', path: key, token });
    expect(await codeOf(client.request({ method: 'GET', path: key, token }))).toBe('RESOURCE_DELETED');
    expect(await codeOf(client.request({ method: 'PUT', path: key, token, body: [1, 2] }))).toBe(
      'INVALID_FORMAT',
    );

    const shortLived = new ManualClock(START, { autoAdvance: true });
    const other = await startSandbox({
      environment: 'uat',
      clock: shortLived,
      quiet: true,
      tokenLifetimeSeconds: 60,
    });
    try {
      const otherClient = new VendorClient({ baseUrl: other.url, clock: shortLived });
      const { accessToken } = await otherClient.login(credentials);
      await shortLived.advance(61_000);
      expect(await codeOf(otherClient.request({ method: 'GET', path: path(), token: accessToken }))).toBe(
        'TOKEN_EXPIRED',
      );
    } finally {
      await other.close();
    }
  });

  it('a real 429 of the nested shape, and a retry that waits its Retry-After', async () => {
    const limited = new ManualClock(START + 10_000, { autoAdvance: true });
    const other = await startSandbox({
      environment: 'uat',
      clock: limited,
      quiet: true,
      limits: [{ limit: 2, windowSeconds: 60 }],
    });
    try {
      const otherClient = new VendorClient({ baseUrl: other.url, clock: limited });
      const { accessToken } = await otherClient.login(credentials);
      const key = path();
      const first = await otherClient.request({
        method: 'POST',
        path: key,
        token: accessToken,
        body: { n: 1 },
      });
      expect(first.rateLimit).toMatchObject({ limit: 2, remaining: 1 });
      await otherClient.request({ method: 'GET', path: key, token: accessToken });
      const error = (await failure(
        otherClient.request({ method: 'GET', path: key, token: accessToken, retry: false }),
      )) as VendorRateLimitError;
      expect(error).toBeInstanceOf(VendorRateLimitError);
      expect(error).toMatchObject({
        status: 429,
        limit: 2,
        retryAfterSeconds: 50,
        rateLimit: { remaining: 0 },
      });
      const before = limited.now();
      const answer = await otherClient.request({
        method: 'GET',
        path: key,
        token: accessToken,
        retry: { budgetMs: 120_000 },
      });
      expect(answer.body).toEqual({ n: 1 });
      expect(limited.now() - before).toBeGreaterThanOrEqual(50_000);
    } finally {
      await other.close();
    }
  });
});

describe('answers of neither shape', () => {
  it.each([
    ['an HTML 502 from a proxy', 502, '<html><body>Bad Gateway</body></html>', 'text/html', true],
    ['JSON of an unknown shape', 400, '{"message":"no","code":7}', 'application/json', false],
    ['an empty 500', 500, '', 'text/plain', true],
    ['a redirect', 302, '', 'text/plain', false],
  ])(
    '%s → UnexpectedVendorResponseError with the status',
    async (_name, status, body, contentType, retryable) => {
      sandbox.inject({ target: 'resources', raw: { status, body, contentType } });
      const error = await failure(client.request({ method: 'GET', path: path(), token, retry: false }));
      expect(error).toBeInstanceOf(UnexpectedVendorResponseError);
      expect(error).toMatchObject({ status, retryable, code: 'UNEXPECTED_VENDOR_RESPONSE' });
    },
  );

  it('a 2xx resource answer that is not JSON', async () => {
    sandbox.inject({ target: 'resources', raw: { status: 200, body: 'ok', contentType: 'text/plain' } });
    await expect(client.request({ method: 'GET', path: path(), token })).rejects.toMatchObject({
      code: 'UNEXPECTED_VENDOR_RESPONSE',
      status: 200,
    });
  });
});

describe('resource calls', () => {
  it('create, read, update and delete, with rate-limit headers and request ids', async () => {
    const key = path();
    const created = await client.request<{ name: string }>({
      method: 'POST',
      path: key,
      token,
      body: { name: 'x' },
    });
    expect(created.status).toBe(201);
    expect(created.requestId).toMatch(/^req-/);
    expect(created.rateLimit).toMatchObject({
      limit: 50,
      remaining: expect.any(Number),
      reset: expect.any(Number),
    });
    const updated = await client.request({ method: 'PUT', path: key, token, body: { name: 'y' } });
    expect(updated.status).toBe(200);
    const read = await client.request<{ name: string }>({ method: 'GET', path: key, token });
    expect(read).toMatchObject({ status: 200, body: { name: 'y' } });
    expect(read.rateLimit.remaining).toBe((created.rateLimit.remaining ?? 0) - 2);
    const deleted = await client.request({ method: 'DELETE', path: key, token });
    expect([200, 204]).toContain(deleted.status);
  });

  it('refuses a path of another shape, a GET with a body and a bad token, sending nothing', async () => {
    const before = answersServed();
    for (const bad of ['/users/1/acme/externalKey/K', '/restful/login/', '/users/1/acme/serviceKey/K?x=1']) {
      const error = await failure(client.request({ method: 'GET', path: bad, token }));
      expect(error).toBeInstanceOf(InvalidResourcePathError);
      expect(error).toMatchObject({ code: 'INVALID_RESOURCE_PATH' });
    }
    await expect(client.request({ method: 'GET', path: path(), token, body: {} })).rejects.toBeInstanceOf(
      InvalidVendorRequestError,
    );
    await expect(
      client.request({ method: 'GET', path: path(), token: 'a\r\nX-Evil: 1' }),
    ).rejects.toBeInstanceOf(InvalidVendorRequestError);
    await expect(client.request({ method: 'GET', path: path(), token: '' })).rejects.toBeInstanceOf(
      InvalidVendorRequestError,
    );
    await expect(client.request({ method: 'PATCH' as never, path: path(), token })).rejects.toBeInstanceOf(
      InvalidVendorRequestError,
    );
    expect(answersServed()).toBe(before);
  });
});
