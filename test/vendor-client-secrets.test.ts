import { createServer } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import { inspect } from 'node:util';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { VendorClient, VendorError } from '../shared/vendor-client/index.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const user = defaultSandboxUsers('uat').find((u) => u.username === 'uat-advisor');
if (!user) throw new Error('the sandbox has no uat-advisor user');
const credentials = { username: user.username, password: user.password };
const PATH = `/users/1/${user.tenant}/serviceKey/secret-1`;

let clock: ManualClock;
let sandbox: Sandbox;
let telemetry: MemoryTelemetry;
let client: VendorClient;
let token: string;

beforeAll(async () => {
  clock = new ManualClock(START, { autoAdvance: true });
  sandbox = await startSandbox({ environment: 'uat', clock, quiet: true });
  token = (await new VendorClient({ baseUrl: sandbox.url, clock }).login(credentials)).accessToken;
});
afterAll(() => sandbox.close());
beforeEach(() => {
  sandbox.update({ outage: false, latencyMs: 0 });
  telemetry = new MemoryTelemetry();
  client = new VendorClient({
    baseUrl: sandbox.url,
    clock,
    telemetry,
    retry: { maxAttempts: 2 },
  });
});

/** A client that gives up after 25 ms: the sandbox's 80 ms latency makes it time out. */
const impatient = () =>
  new VendorClient({ baseUrl: sandbox.url, clock, telemetry, timeoutMs: 25, retry: { maxAttempts: 2 } });

const caught = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );

/** Every way an error can be shown: none may contain a secret. */
function expectNoSecret(error: unknown, secrets: string[]): void {
  expect(error).toBeInstanceOf(VendorError);
  const err = error as Error;
  const views = [
    JSON.stringify(err),
    err.message,
    String(err),
    Object.keys(err).join(','),
    JSON.stringify(Object.fromEntries(Object.entries(err))),
    inspect(err, { depth: 20, showHidden: true }),
    telemetry.dump(),
  ];
  // The cause chain, link by link, in case inspect stops early.
  for (let cause = err.cause; cause !== undefined && cause !== null; cause = (cause as Error).cause) {
    views.push(inspect(cause, { depth: 20, showHidden: true }), String(cause));
  }
  for (const view of views) for (const secret of secrets) expect(view).not.toContain(secret);
}

describe('no password or token in any error or log line', () => {
  it('a rejected login, even when the vendor echoes the password', async () => {
    const error = await caught(client.login({ ...credentials, password: 'Wrong-Password-123' }));
    expectNoSecret(error, ['Wrong-Password-123']);
    const echo = `invalid password ${credentials.password} for ${credentials.username}`;
    sandbox.inject({
      target: 'login',
      raw: {
        status: 401,
        contentType: 'application/json',
        body: JSON.stringify({
          errorStatus: 401,
          errorCode: 'INVALID_CREDENTIALS',
          errorMessage: echo,
          details: { password: credentials.password },
        }),
      },
    });
    const echoed = await caught(client.login(credentials));
    expect(echoed).toMatchObject({ code: 'INVALID_CREDENTIALS', status: 401 });
    expectNoSecret(echoed, [credentials.password]);
  });

  it('network failure, timeout and abort of a login', async () => {
    const unreachable = new VendorClient({
      baseUrl: `http://127.0.0.1:${await closedPort()}`,
      clock,
      telemetry,
      retry: { maxAttempts: 2 },
    });
    const refused = await caught(unreachable.login(credentials));
    expect(refused).toMatchObject({ code: 'VENDOR_UNREACHABLE' });
    expectNoSecret(refused, [credentials.password]);

    sandbox.update({ latencyMs: 80 });
    const timedOut = await caught(impatient().login(credentials));
    expect(timedOut).toMatchObject({ code: 'VENDOR_TIMEOUT' });
    expectNoSecret(timedOut, [credentials.password]);

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 5);
    const aborted = await caught(client.login(credentials, { signal: controller.signal }));
    expect(aborted).toMatchObject({ code: 'VENDOR_CALL_ABORTED' });
    expectNoSecret(aborted, [credentials.password]);
  });

  it('a login answer of the wrong shape, or with an unusable token, never quotes the token', async () => {
    const expired = await new SignJWT({ exp: 1000, env: 'uat' })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode('test key of the expired token'));
    const base = { accessToken: expired, roles: [], status: 'SUCCESS', exp: 1000 };
    sandbox.inject({
      target: 'login',
      raw: { status: 200, contentType: 'application/json', body: JSON.stringify(base) },
    });
    const wrongShape = await caught(client.login(credentials));
    expect(wrongShape).toMatchObject({ code: 'UNEXPECTED_VENDOR_RESPONSE' });
    expectNoSecret(wrongShape, [expired, credentials.password]);

    const full = {
      ...base,
      userDetails: { username: 'u', userKey: 'k', groups: [] },
      executionPlatformKey: 'e',
      tenant: 't',
      defaultCompanyInventorySource: 'MARKET',
      companyKey: 'c',
    };
    sandbox.inject({
      target: 'login',
      raw: { status: 200, contentType: 'application/json', body: JSON.stringify(full) },
    });
    const unusable = await caught(client.login(credentials));
    expect(unusable).toMatchObject({ code: 'TOKEN_UNUSABLE' });
    expectNoSecret(unusable, [expired, credentials.password]);
  });

  it('resource calls: a vendor echoing the token, a retried 5xx, a timeout', async () => {
    sandbox.inject({
      target: 'resources',
      raw: {
        status: 401,
        contentType: 'application/json',
        body: JSON.stringify({
          errorStatus: 401,
          errorCode: 'TOKEN_INVALID',
          errorMessage: `token ${token} is not valid`,
        }),
      },
    });
    const echoed = await caught(client.request({ method: 'GET', path: PATH, token }));
    expect(echoed).toMatchObject({ code: 'TOKEN_INVALID', vendorMessage: 'token [REDACTED] is not valid' });
    expectNoSecret(echoed, [token]);

    sandbox.inject({ target: 'resources', status: 503, count: 2 });
    const retried = await caught(client.request({ method: 'PUT', path: PATH, token, body: { note: 'x' } }));
    expect(telemetry.logs).toHaveLength(1);
    expect(telemetry.logs[0]?.attributes).toMatchObject({
      path: PATH,
      tokenId: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expectNoSecret(retried, [token]);

    sandbox.update({ latencyMs: 80 });
    const timedOut = await caught(impatient().request({ method: 'GET', path: PATH, token }));
    expect(timedOut).toMatchObject({ code: 'VENDOR_TIMEOUT' });
    expectNoSecret(timedOut, [token]);
  });

  it('a redirect does not carry the credentials anywhere: it is not followed', async () => {
    // A stand-in for a misconfigured proxy: 307 would make a following client re-POST the password.
    const redirector = createServer((_req, res) => {
      res.writeHead(307, { Location: `${sandbox.url}/restful/login/` }).end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = redirector.address() as AddressInfo;
      sandbox.resetStats();
      const redirected = new VendorClient({ baseUrl: `http://127.0.0.1:${port}`, clock, telemetry });
      const error = await caught(redirected.login(credentials));
      expect(error).toMatchObject({ code: 'UNEXPECTED_VENDOR_RESPONSE', status: 307 });
      expect(sandbox.stats().loginRequests).toBe(0);
      expectNoSecret(error, [credentials.password]);
    } finally {
      await new Promise<void>((resolve) => redirector.close(() => resolve()));
    }
  });
});

/** A loopback port nothing listens on: bind one, then close it. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
