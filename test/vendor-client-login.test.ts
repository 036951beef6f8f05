import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import {
  InvalidVendorRequestError,
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorClient,
  VendorTokenUnusableError,
} from '../shared/vendor-client/index.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const user = defaultSandboxUsers('uat').find((u) => u.username === 'uat-advisor');
if (!user) throw new Error('the sandbox has no uat-advisor user');
const credentials = { username: user.username, password: user.password };

let clock: ManualClock;
let sandbox: Sandbox;
let client: VendorClient;

beforeAll(async () => {
  clock = new ManualClock(START, { autoAdvance: true });
  sandbox = await startSandbox({ environment: 'uat', clock, quiet: true });
});
afterAll(() => sandbox.close());
beforeEach(() => {
  clock.set(START);
  sandbox.update({ outage: false, clockOffsetSeconds: 0, tokenLifetimeSeconds: 14_400 });
  sandbox.resetStats();
  client = new VendorClient({ baseUrl: sandbox.url, clock });
});

const nowSeconds = () => Math.floor(clock.now() / 1000);
const key = new TextEncoder().encode('a test key: the client decodes, it does not verify');
const mint = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(key);

/** Makes the sandbox answer the next login with this exact body (a vendor that says something else). */
function answerNextLoginWith(body: Record<string, unknown>): void {
  sandbox.inject({
    target: 'login',
    raw: { status: 200, body: JSON.stringify(body), contentType: 'application/json' },
  });
}

const loginBody = (accessToken: string, extra: Record<string, unknown> = {}) => ({
  userDetails: { username: 'raw-user', userKey: 'UK-1', groups: [1, 2] },
  roles: ['ANONYMOUS'],
  accessToken,
  refreshToken: 'rt-unused',
  executionPlatformKey: 'EP-1',
  tenant: 'raw-tenant',
  defaultCompanyInventorySource: 'MARKET',
  status: 'SUCCESS',
  companyKey: 'CK-1',
  ...extra,
});

describe('login against the sandbox', () => {
  it('returns every field of the login result, the expiry from body and JWT, env, iat, Date and request id', async () => {
    const result = await client.login(credentials);
    expect(result).toMatchObject({
      userDetails: { username: user.username, userKey: user.userKey, groups: user.groups },
      roles: user.roles,
      executionPlatformKey: user.executionPlatformKey,
      tenant: user.tenant,
      defaultCompanyInventorySource: user.defaultCompanyInventorySource,
      status: 'SUCCESS',
      companyKey: user.companyKey,
      exp: nowSeconds() + 14_400,
      env: 'uat',
      issuedAt: nowSeconds(),
      vendorDate: START,
    });
    expect(result.refreshToken).toEqual(expect.any(String));
    expect(result.requestId).toMatch(/^req-/);
    expect(decodeJwt(result.accessToken).exp).toBe(result.exp);
    expect(sandbox.stats().loginRequests).toBe(1);
  });

  it("reports the vendor's clock from its Date header, and expiry on the vendor's clock", async () => {
    sandbox.update({ clockOffsetSeconds: 90, tokenLifetimeSeconds: 3600 });
    const result = await client.login(credentials);
    expect(result.vendorDate).toBe(START + 90_000);
    expect(result.exp).toBe(nowSeconds() + 90 + 3600);
  });

  it('is final on INVALID_CREDENTIALS: one attempt, the vendor error with its request id and timestamp', async () => {
    const error = await client
      .login({ ...credentials, password: 'not-the-password' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorApiError);
    expect(error).toMatchObject({ code: 'INVALID_CREDENTIALS', status: 401, retryable: false });
    const apiError = error as VendorApiError;
    expect(apiError.requestId).toMatch(/^req-/);
    expect(apiError.timestamp).toBe(new Date(START).toISOString());
    expect(apiError.vendorMessage.length).toBeGreaterThan(0);
    expect(sandbox.stats().loginRequests).toBe(1);
  });

  it('refuses empty credentials without sending anything', async () => {
    await expect(client.login({ username: '', password: 'x' })).rejects.toBeInstanceOf(
      InvalidVendorRequestError,
    );
    await expect(client.login({ username: 'x' } as never)).rejects.toMatchObject({
      code: 'INVALID_VENDOR_REQUEST',
    });
    expect(sandbox.stats().loginRequests).toBe(0);
  });
});

describe('login during a vendor outage', () => {
  it('fails after the bounded attempts while the outage lasts, and succeeds once it is over', async () => {
    sandbox.update({ outage: true });
    const error = await client.login(credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorApiError);
    expect(error).toMatchObject({ status: 503, retryable: true });
    expect(sandbox.stats().loginRequests).toBe(4);
    // Three full-jitter waits: at most 200 + 400 + 800 ms of clock time.
    expect(clock.now() - START).toBeLessThanOrEqual(1400);

    sandbox.update({ outage: false });
    const result = await client.login(credentials);
    expect(result.tenant).toBe(user.tenant);
    expect(sandbox.stats().loginRequests).toBe(5);
  });
});

describe('token expiry from an answer the test controls', () => {
  it('takes the body exp when it is earlier than the JWT exp', async () => {
    const token = await mint({ exp: nowSeconds() + 7200, iat: nowSeconds() - 5, env: 'prod' });
    answerNextLoginWith(loginBody(token, { exp: nowSeconds() + 3600 }));
    const result = await client.login(credentials);
    expect(result).toMatchObject({ exp: nowSeconds() + 3600, env: 'prod', issuedAt: nowSeconds() - 5 });
    expect(result.accessToken).toBe(token);
  });

  it('takes the JWT exp when it is earlier than the body exp', async () => {
    const token = await mint({ exp: nowSeconds() + 1800 });
    answerNextLoginWith(loginBody(token, { exp: nowSeconds() + 3600 }));
    const result = await client.login(credentials);
    expect(result.exp).toBe(nowSeconds() + 1800);
    expect(result.env).toBeUndefined();
    expect(result.issuedAt).toBeUndefined();
  });

  it('takes the JWT exp when the body has none, as in the vendor sample body', async () => {
    const token = await mint({ exp: nowSeconds() + 600, env: 'uat' });
    answerNextLoginWith(loginBody(token));
    expect((await client.login(credentials)).exp).toBe(nowSeconds() + 600);
  });

  it.each([
    ['no exp anywhere', {}, undefined, /no usable exp/],
    ['a non-numeric exp in body and JWT', { exp: 'later' }, 'later', /no usable exp/],
    ['an expired token', { exp: 1_000 }, 1_000, /already expired/],
  ])('refuses a token with %s, once, without retrying', async (_name, claims, bodyExp, message) => {
    const token = await mint(claims);
    answerNextLoginWith(loginBody(token, bodyExp === undefined ? {} : { exp: bodyExp }));
    const error = await client.login(credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorTokenUnusableError);
    expect((error as Error).message).toMatch(message);
    expect(sandbox.stats().loginRequests).toBe(1);
  });

  it('refuses a token that is not a JWT, and a login body of another shape', async () => {
    answerNextLoginWith(loginBody('opaque-token-not-a-jwt', { exp: nowSeconds() + 600 }));
    await expect(client.login(credentials)).rejects.toMatchObject({ code: 'TOKEN_UNUSABLE' });
    answerNextLoginWith({ token: 'x', expiresIn: 3600 });
    const error = await client.login(credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnexpectedVendorResponseError);
    expect(error).toMatchObject({ status: 200, retryable: false });
    expect((error as Error).message).toMatch(/accessToken/);
  });
});
