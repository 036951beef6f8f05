import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import {
  errorBodyProblems,
  fixture,
  parseBody,
  startVendHarness,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';

let dynamo: LocalDynamo;
let h: VendHarness;
beforeAll(async () => {
  dynamo = await startDynalite();
  h = await startVendHarness(dynamo);
});
afterAll(async () => {
  await h.close();
  await dynamo.close();
});
beforeEach(() => h.sandbox.resetStats());

/** Nothing happened: no login, no read of the tokens table, no ledger write. */
async function expectNothingDone(readsBefore: number): Promise<void> {
  expect(h.sandbox.stats().loginRequests).toBe(0);
  expect(h.store.reads).toBe(readsBefore);
  expect(await h.ledgerItems()).toBe(0);
}

function expectError(result: Awaited<ReturnType<VendHarness['invoke']>>, status: number, code: string) {
  expect(result.statusCode).toBe(status);
  expect(errorBodyProblems(result)).toEqual([]);
  expect(parseBody(result)).toMatchObject({ errorStatus: status, errorCode: code });
}

describe('authorization by IAM principal (Function URL IAM-auth events)', () => {
  it.each([
    ['get-token', 'an assumed role whose rule names the role'],
    ['get-token-role-with-path', 'an assumed role whose rule names the role with its path'],
    ['get-token-iam-user', 'an IAM user with a path'],
    ['get-token-cross-account', 'a role of another account with its own rule'],
  ])('%s: %s gets the token', async (name) => {
    const event = fixture(name);
    const result = await h.invoke(event);
    expect(result.statusCode).toBe(200);
    const setId = event.rawPath.split('/')[3];
    expect(parseBody(result)).toMatchObject({ credentialSet: setId, accessToken: expect.any(String) });
  });

  it.each([
    ['get-token-other-account', 'the same role name in another account'],
    ['get-token-unknown-role', 'a role of the function’s own account that no rule names'],
  ])('%s: %s gets 403 INSUFFICIENT_PERMISSIONS and nothing is done', async (name) => {
    const reads = h.store.reads;
    const result = await h.invoke(fixture(name));
    expectError(result, 403, 'INSUFFICIENT_PERMISSIONS');
    expect(result.body).not.toContain('uat-advisor');
    await expectNothingDone(reads);
  });

  it('a caller with no rule cannot tell unknown set ids from known ones: 403 for both, on every route', async () => {
    const reads = h.store.reads;
    const outsider = fixture('get-token-unknown-role');
    for (const path of [
      '/v1/credential-sets/uat-advisor/token',
      '/v1/credential-sets/uat-spare/token',
      '/v1/credential-sets/no-such-set/token',
    ]) {
      const result = await h.invoke(withChanges(outsider, { path }));
      expectError(result, 403, 'INSUFFICIENT_PERMISSIONS');
    }
    expectError(
      await h.invoke(withChanges(outsider, { path: '/v1/credential-sets' })),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    const permit = withChanges(fixture('acquire-permits'), {
      callerArn: outsider.requestContext.authorizer.iam.userArn,
      path: '/v1/credential-sets/no-such-set/permits',
    });
    expectError(await h.invoke(permit), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectNothingDone(reads);
  });

  it('a known caller gets 404 for an unknown set and 403 for a set of another consumer', async () => {
    const reads = h.store.reads;
    const portfolio = fixture('get-token');
    expectError(
      await h.invoke(withChanges(portfolio, { path: '/v1/credential-sets/no-such-set/token' })),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await h.invoke(withChanges(portfolio, { path: '/v1/credential-sets/uat-spare/token' })),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    expectError(
      await h.invoke(withChanges(portfolio, { path: '/v1/credential-sets/uat-execution/token' })),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    await expectNothingDone(reads);
  });

  it('an event without an IAM authorizer, or whose account disagrees with the ARN, is refused', async () => {
    const noAuthorizer = structuredClone(fixture('get-token')) as unknown as {
      requestContext: { authorizer?: unknown };
    };
    delete noAuthorizer.requestContext.authorizer;
    expectError(await h.handler(noAuthorizer as never, {} as never), 403, 'INSUFFICIENT_PERMISSIONS');
    expectError(
      await h.invoke(withChanges(fixture('get-token'), { callerAccountId: '999988887777' })),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
  });
});

describe('routes and methods', () => {
  it.each([
    '/',
    '/v1',
    '/v2/credential-sets',
    '/v1/credential-sets/',
    '/v1/credential-sets/uat-advisor',
    '/v1/credential-sets/uat-advisor/token/',
    '/v1/credential-sets/uat-advisor/tokens',
    '/v1/credential-sets//token',
    '/v1/credential-sets/uat-advisor/permits/returns/extra',
    '/V1/credential-sets',
  ])('unknown route %s: 404 RESOURCE_NOT_FOUND', async (path) => {
    const result = await h.invoke(withChanges(fixture('get-token'), { path }));
    expectError(result, 404, 'RESOURCE_NOT_FOUND');
  });

  it.each([
    ['DELETE', '/v1/credential-sets/uat-advisor/token', 'GET'],
    ['POST', '/v1/credential-sets', 'GET'],
    ['PUT', '/v1/credential-sets/uat-advisor/permits', 'POST'],
    ['GET', '/v1/credential-sets/uat-advisor/permits/returns', 'POST'],
    ['PATCH', '/v1/credential-sets/uat-advisor/rate-limit-reports', 'POST'],
    ['HEAD', '/v1/credential-sets/uat-advisor/token', 'GET'],
  ])('%s %s: 405 METHOD_NOT_ALLOWED with Allow: %s', async (method, path, allow) => {
    const result = await h.invoke(withChanges(fixture('get-token'), { method, path }));
    expectError(result, 405, 'METHOD_NOT_ALLOWED');
    expect(result.headers.allow).toBe(allow);
  });

  it('percent-encoded set ids are decoded; a malformed escape matches nothing', async () => {
    expect(
      (await h.invoke(withChanges(fixture('get-token'), { path: '/v1/credential-sets/uat%2Dadvisor/token' })))
        .statusCode,
    ).toBe(200);
    expectError(
      await h.invoke(withChanges(fixture('get-token'), { path: '/v1/credential-sets/uat%ZZadvisor/token' })),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });
});

describe('error bodies', () => {
  it('carry the vendor’s shape with the Function URL request id and the clock’s time', async () => {
    const event = withChanges(fixture('get-token'), {
      path: '/v1/nothing',
      requestId: 'a1b2c3d4-0000-4000-8000-000000000001',
    });
    const result = await h.invoke(event);
    expect(parseBody(result)).toEqual({
      errorStatus: 404,
      errorCode: 'RESOURCE_NOT_FOUND',
      errorMessage: 'no such route',
      timestamp: new Date(h.clock.now()).toISOString(),
      requestId: 'a1b2c3d4-0000-4000-8000-000000000001',
    });
    expect(result.headers['x-request-id']).toBe('a1b2c3d4-0000-4000-8000-000000000001');
    expect(result.headers['cache-control']).toBe('no-store');
  });

  it('never echo what the caller put in the path', async () => {
    const token = parseBody<{ accessToken: string }>(await h.invoke(fixture('get-token'))).accessToken;
    const result = await h.invoke(
      withChanges(fixture('get-token'), { path: `/v1/credential-sets/${token}/token` }),
    );
    expectError(result, 404, 'RESOURCE_NOT_FOUND');
    expect(result.body).not.toContain(token);
  });
});

describe('request log', () => {
  it('records refused callers with their ARN and the decision, and never a header value', async () => {
    const event = fixture('get-token-unknown-role');
    await h.invoke(event);
    const line = h.telemetry.logs.filter((log) => log.message === 'vend request').at(-1);
    expect(line?.attributes).toMatchObject({
      caller: 'arn:aws:sts::123456789012:assumed-role/analytics-sandbox/jane.doe@example.com',
      decision: 'INSUFFICIENT_PERMISSIONS',
      status: 403,
      requestId: '5b0f0f43-1f5c-4a51-9d4f-0a1b2c3d4e12',
    });
    // The SigV4 headers (session token, signature) stay out of the logs.
    expect(h.telemetry.dump()).not.toContain('EXAMPLE-SESSION-TOKEN-NOT-A-SECRET');
    expect(h.telemetry.dump()).not.toContain('EXAMPLE-SIGNATURE-NOT-A-SECRET');
  });
});
