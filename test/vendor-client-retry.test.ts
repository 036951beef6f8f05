import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { MemoryTelemetry } from '../shared/observability.js';
import {
  type RetrySettings,
  VendorApiError,
  VendorCallAbortedError,
  VendorClient,
  VendorRateLimitError,
  VendorTimeoutError,
  VendorUnreachableError,
} from '../shared/vendor-client/index.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const user = defaultSandboxUsers('uat').find((u) => u.username === 'uat-advisor');
if (!user) throw new Error('the sandbox has no uat-advisor user');
const credentials = { username: user.username, password: user.password };
/** random() just below 1: every full-jitter wait is its ceiling, so clock time is exact. */
const CEILING = { random: () => 0.999_999_9 };

let clock: ManualClock;
let sandbox: Sandbox;

const clientWith = (
  retry: Partial<RetrySettings> = {},
  extra: { timeoutMs?: number; telemetry?: MemoryTelemetry } = {},
) => new VendorClient({ baseUrl: sandbox.url, clock, retry, ...extra });
const logins = () => sandbox.stats().loginRequests;
const elapsed = () => clock.now() - START;
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );

beforeAll(async () => {
  clock = new ManualClock(START, { autoAdvance: true });
  sandbox = await startSandbox({ environment: 'uat', clock, quiet: true });
});
afterAll(() => sandbox.close());
beforeEach(() => {
  clock.set(START);
  sandbox.update({ outage: false, latencyMs: 0 });
  sandbox.resetStats();
});

describe('what is retried, and how long it waits', () => {
  it('500, 502, 503 and 504 are retried with exponential full-jitter waits until success', async () => {
    for (const status of [500, 502, 503]) sandbox.inject({ target: 'login', status });
    sandbox.inject({ target: 'login', status: 504 });
    const result = await clientWith({ maxAttempts: 5, ...CEILING }).login(credentials);
    expect(result.tenant).toBe(user.tenant);
    expect(logins()).toBe(5);
    expect(elapsed()).toBe(200 + 400 + 800 + 1600);
  });

  it('a wait is random in [0, base·2^n]: with random() = 0 there is no wait at all', async () => {
    sandbox.inject({ target: 'login', status: 503, count: 2 });
    await clientWith({ random: () => 0 }).login(credentials);
    expect(logins()).toBe(3);
    expect(elapsed()).toBe(0);
  });

  it("429 waits the vendor's Retry-After, not a backoff", async () => {
    sandbox.inject({ target: 'login', errorCode: 'RATE_LIMIT_EXCEEDED' });
    const seen = (await failure(clientWith().login(credentials, { retry: false }))) as VendorRateLimitError;
    expect(seen).toBeInstanceOf(VendorRateLimitError);
    const retryAfterMs = (seen.retryAfterSeconds ?? 0) * 1000;
    expect(retryAfterMs).toBeGreaterThan(5000);

    sandbox.inject({ target: 'login', errorCode: 'RATE_LIMIT_EXCEEDED' });
    await clientWith({ budgetMs: retryAfterMs + 1000, maxDelayMs: 10 }).login(credentials);
    expect(logins()).toBe(3);
    expect(elapsed()).toBeGreaterThanOrEqual(retryAfterMs);
  });

  it('a Retry-After longer than the budget is not waited: the 429 is thrown at once', async () => {
    sandbox.inject({ target: 'login', errorCode: 'RATE_LIMIT_EXCEEDED' });
    const error = await failure(clientWith({ budgetMs: 1000 }).login(credentials));
    expect(error).toBeInstanceOf(VendorRateLimitError);
    expect(logins()).toBe(1);
    expect(elapsed()).toBe(0);
  });

  it('stops at the time budget: a wait that would overrun it is not taken', async () => {
    sandbox.update({ outage: true });
    const retry = { maxAttempts: 100, baseDelayMs: 1000, maxDelayMs: 1000, budgetMs: 5500, ...CEILING };
    const error = await failure(clientWith(retry).login(credentials));
    expect(error).toBeInstanceOf(VendorApiError);
    expect(error).toMatchObject({ status: 503 });
    expect(logins()).toBe(6);
    expect(elapsed()).toBe(5000);
  });

  it('stops at max attempts', async () => {
    sandbox.update({ outage: true });
    await expect(clientWith().login(credentials)).rejects.toMatchObject({ status: 503 });
    expect(logins()).toBe(4);
    sandbox.resetStats();
    await expect(clientWith({ maxAttempts: 2 }).login(credentials)).rejects.toMatchObject({ status: 503 });
    expect(logins()).toBe(2);
  });

  it.each([
    ['MISSING_REQUIRED_FIELD', 400],
    ['INVALID_CREDENTIALS', 401],
    ['INSUFFICIENT_PERMISSIONS', 403],
    ['RESOURCE_NOT_FOUND', 404],
    ['DUPLICATE_KEY', 409],
    ['RESOURCE_DELETED', 410],
    ['GUIDELINE_VIOLATION', 422],
  ] as const)('%s (%i) is never retried', async (code, status) => {
    // One fault only: a retry would reach the real login and succeed, failing the test.
    sandbox.inject({ target: 'login', errorCode: code });
    await expect(clientWith().login(credentials)).rejects.toMatchObject({ code, status, retryable: false });
    expect(logins()).toBe(1);
  });

  it('resource calls are retried the same way, and not at all with retry: false', async () => {
    const client = clientWith(CEILING);
    const { accessToken: token } = await client.login(credentials);
    const path = `/users/1/${user.tenant}/serviceKey/retry-1`;
    await client.request({ method: 'POST', path, token, body: { a: 1 } });
    sandbox.resetStats();
    sandbox.inject({ target: 'resources', status: 503, count: 2 });
    expect((await client.request({ method: 'GET', path, token })).body).toEqual({ a: 1 });
    expect(sandbox.stats().responsesByStatus).toEqual({ 200: 1, 503: 2 });
    sandbox.inject({ target: 'resources', status: 503 });
    await expect(client.request({ method: 'GET', path, token, retry: false })).rejects.toMatchObject({
      status: 503,
    });
    expect(sandbox.stats().responsesByStatus).toEqual({ 200: 1, 503: 3 });
  });
});

describe('network failures, timeouts and aborts', () => {
  it('a closed port is retried, then VendorUnreachableError', async () => {
    const port = await closedPort();
    const telemetry = new MemoryTelemetry();
    const client = new VendorClient({
      baseUrl: `http://127.0.0.1:${port}`,
      clock,
      retry: CEILING,
      telemetry,
    });
    const error = await failure(client.login(credentials));
    expect(error).toBeInstanceOf(VendorUnreachableError);
    expect((error as Error).message).toContain('ECONNREFUSED');
    // Refused at connect: nothing was written, so the vendor cannot have acted (a POST may go again).
    expect(error).toMatchObject({ notSent: true });
    expect(telemetry.logs.filter((l) => l.message === 'vendor call failed; retrying')).toHaveLength(3);
    expect(telemetry.logs.map((l) => l.attributes.errorCode)).toEqual(Array(3).fill('VENDOR_UNREACHABLE'));
    expect(elapsed()).toBe(200 + 400 + 800);
  });

  it('an answer slower than the timeout is a VendorTimeoutError, retried up to max attempts', async () => {
    // A sandbox of its own, closed at the end: under load an attempt that timed out at the client may reach a
    // sandbox only later, and would be counted by the next test. It holds each answer far longer than the
    // timeout, so no load on the machine can let one through.
    const slow = await startSandbox({ environment: 'uat', clock, quiet: true, latencyMs: 5000 });
    try {
      const telemetry = new MemoryTelemetry();
      const client = new VendorClient({
        baseUrl: slow.url,
        clock,
        retry: { maxAttempts: 2 },
        timeoutMs: 20,
        telemetry,
      });
      const error = await failure(client.login(credentials));
      expect(error).toBeInstanceOf(VendorTimeoutError);
      expect(error).toMatchObject({ code: 'VENDOR_TIMEOUT', retryable: true });
      // Counted by the client: under load an attempt can time out before the sandbox has even read it.
      const retries = telemetry.logs.filter((l) => l.message === 'vendor call failed; retrying');
      expect(retries.map((l) => l.attributes.errorCode)).toEqual(['VENDOR_TIMEOUT']);
    } finally {
      await slow.close();
    }
  });

  it("the caller's signal aborts an attempt in flight, and it is not retried", async () => {
    sandbox.update({ latencyMs: 5000 });
    const controller = new AbortController();
    const call = failure(clientWith().login(credentials, { signal: controller.signal }));
    // Abort once the sandbox holds the attempt (not after a fixed delay, which load can outrun).
    while (logins() === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    controller.abort(new Error('caller gave up'));
    const error = await call;
    expect(error).toBeInstanceOf(VendorCallAbortedError);
    expect(error).toMatchObject({ retryable: false, cause: new Error('caller gave up') });
    expect(logins()).toBe(1);
  });

  it('an already aborted signal sends nothing', async () => {
    const error = await failure(clientWith().login(credentials, { signal: AbortSignal.abort() }));
    expect(error).toBeInstanceOf(VendorCallAbortedError);
    expect(logins()).toBe(0);
  });

  it('an abort during a retry wait ends the wait and the call', async () => {
    const stillClock = new ManualClock(START);
    const client = new VendorClient({ baseUrl: sandbox.url, clock: stillClock });
    sandbox.inject({ target: 'login', status: 503 });
    const controller = new AbortController();
    const call = failure(client.login(credentials, { signal: controller.signal }));
    while (stillClock.pendingSleepers === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    controller.abort();
    expect(await call).toBeInstanceOf(VendorCallAbortedError);
    expect(stillClock.pendingSleepers).toBe(0);
    expect(logins()).toBe(1);
  });
});

/** A port nothing listens on: bind one, then close it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
