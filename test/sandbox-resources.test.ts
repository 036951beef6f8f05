import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { call, tokenFor } from './support/sandbox-http.js';

const ADVISOR_TENANT = 'uat-advisor-tenant';
const EXECUTION_TENANT = 'uat-execution-tenant';
const path = (key: string, tenant = ADVISOR_TENANT, number = '7') =>
  `/users/${number}/${tenant}/serviceKey/${key}`;

describe('vendor sandbox: resources', () => {
  const clock = new ManualClock();
  let sandbox: Sandbox;
  let advisor: string;
  let execution: string;

  beforeAll(async () => {
    // Generous limits: these tests are about resources, not quotas.
    sandbox = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      limits: [{ limit: 10_000, windowSeconds: 60 }],
    });
    advisor = await tokenFor(sandbox.url, 'uat-advisor', 'uat-advisor-sandbox-pw');
    execution = await tokenFor(sandbox.url, 'uat-execution', 'uat-execution-sandbox-pw');
  });
  afterAll(() => sandbox.close());

  it('creates, reads, replaces and deletes a resource, then answers 410 for it', async () => {
    const created = await call(sandbox.url, 'POST', path('c-1'), {
      token: advisor,
      body: { name: 'Ada', risk: 3 },
    });
    expect([created.status, created.body]).toEqual([201, { name: 'Ada', risk: 3 }]);
    const read = await call(sandbox.url, 'GET', path('c-1'), { token: advisor });
    expect([read.status, read.body]).toEqual([200, { name: 'Ada', risk: 3 }]);

    const duplicate = await call(sandbox.url, 'POST', path('c-1'), { token: advisor, body: { name: 'Bob' } });
    expect([duplicate.status, duplicate.body.errorCode, duplicate.body.errorStatus]).toEqual([
      409,
      'DUPLICATE_KEY',
      409,
    ]);

    const replaced = await call(sandbox.url, 'PUT', path('c-1'), {
      token: advisor,
      body: { name: 'Ada L.' },
    });
    expect([replaced.status, replaced.body]).toEqual([200, { name: 'Ada L.' }]);
    expect((await call(sandbox.url, 'GET', path('c-1'), { token: advisor })).body).toEqual({
      name: 'Ada L.',
    });

    const removed = await call(sandbox.url, 'DELETE', path('c-1'), { token: advisor });
    expect([removed.status, removed.text]).toEqual([204, '']);
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const body = method === 'PUT' ? { name: 'x' } : undefined;
      const gone = await call(sandbox.url, method, path('c-1'), { token: advisor, body });
      expect([method, gone.status, gone.body.errorCode]).toEqual([method, 410, 'RESOURCE_DELETED']);
    }
    // The key is free again after a delete.
    const again = await call(sandbox.url, 'POST', path('c-1'), { token: advisor, body: { name: 'Cy' } });
    expect(again.status).toBe(201);
  });

  it('answers 404 RESOURCE_NOT_FOUND for absent resources and for any other path or method', async () => {
    for (const [method, target] of [
      ['GET', path('absent')],
      ['PUT', path('absent')],
      ['DELETE', path('absent')],
      ['GET', '/'],
      ['GET', '/users/7'],
      ['GET', `/users/7/${ADVISOR_TENANT}/externalKey/c-1`],
      ['GET', `/users/7/${ADVISOR_TENANT}/serviceKey/c-1/accounts`],
      ['PATCH', path('c-1')],
      ['GET', '/restful/login/'],
    ] as const) {
      const reply = await call(sandbox.url, method, target, {
        token: advisor,
        body: method === 'GET' ? undefined : {},
      });
      expect([method, target, reply.status, reply.body?.errorCode]).toEqual([
        method,
        target,
        404,
        'RESOURCE_NOT_FOUND',
      ]);
    }
    expect((await call(sandbox.url, 'PUT', path('absent'), { token: advisor, body: {} })).status).toBe(404);
    expect((await call(sandbox.url, 'GET', path('absent'), { token: advisor })).status).toBe(404);
  });

  it('checks the token before the path', async () => {
    const reply = await call(sandbox.url, 'GET', '/no/such/thing');
    expect([reply.status, reply.body.errorCode]).toEqual([401, 'TOKEN_MISSING']);
  });

  it('answers 403 WRONG_TENANT for another tenant, and changes nothing there', async () => {
    await call(sandbox.url, 'POST', path('shared', EXECUTION_TENANT), { token: execution, body: { v: 1 } });
    for (const method of ['GET', 'POST', 'PUT', 'DELETE']) {
      const reply = await call(sandbox.url, method, path('shared', EXECUTION_TENANT), {
        token: advisor,
        body: method === 'GET' ? undefined : { v: 2 },
      });
      expect([method, reply.status, reply.body.errorCode]).toEqual([method, 403, 'WRONG_TENANT']);
    }
    const still = await call(sandbox.url, 'GET', path('shared', EXECUTION_TENANT), { token: execution });
    expect([still.status, still.body]).toEqual([200, { v: 1 }]);
  });

  it('keeps tenants apart: the same key in two tenants is two resources', async () => {
    await call(sandbox.url, 'POST', path('same'), { token: advisor, body: { owner: 'advisor' } });
    await call(sandbox.url, 'POST', path('same', EXECUTION_TENANT), {
      token: execution,
      body: { owner: 'execution' },
    });
    expect((await call(sandbox.url, 'GET', path('same'), { token: advisor })).body).toEqual({
      owner: 'advisor',
    });
    expect(
      (await call(sandbox.url, 'GET', path('same', EXECUTION_TENANT), { token: execution })).body,
    ).toEqual({
      owner: 'execution',
    });
  });

  it('answers 400 INVALID_FORMAT for a bad number, bad key characters or a body that is no JSON object', async () => {
    const cases: [string, string, unknown][] = [
      ['GET', path('c-2', ADVISOR_TENANT, 'abc'), undefined],
      ['GET', path('c-2', ADVISOR_TENANT, '-1'), undefined],
      ['GET', path('bad%20key'), undefined],
      ['GET', path('bad!key'), undefined],
      ['GET', path('x'.repeat(129)), undefined],
      ['POST', path('c-2'), 'not json'],
      ['POST', path('c-2'), '[1,2]'],
      ['POST', path('c-2'), 'null'],
      ['POST', path('c-2'), ''],
      ['PUT', path('c-2'), '"text"'],
    ];
    for (const [method, target, body] of cases) {
      const reply = await call(sandbox.url, method, target, { token: advisor, body });
      expect([method, target, reply.status, reply.body.errorCode]).toEqual([
        method,
        target,
        400,
        'INVALID_FORMAT',
      ]);
    }
    expect((await call(sandbox.url, 'GET', path('c-2'), { token: advisor })).status).toBe(404);
  });

  it('answers 413 with a §7-style body for an oversize body, stores nothing, and keeps serving', async () => {
    const big = { blob: 'x'.repeat(100 * 1024) };
    const reply = await call(sandbox.url, 'POST', path('big'), { token: advisor, body: big });
    expect(reply.status).toBe(413);
    expect(reply.body).toMatchObject({
      errorStatus: 413,
      errorCode: 'PAYLOAD_TOO_LARGE',
      requestId: expect.any(String),
    });
    const login = await call(sandbox.url, 'POST', '/restful/login/', {
      body: { username: 'x'.repeat(70_000), password: 'p' },
    });
    expect(login.status).toBe(413);
    expect((await call(sandbox.url, 'GET', path('big'), { token: advisor })).status).toBe(404);
  });

  it('survives malformed HTTP and odd input, answering the next request normally', async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(sandbox.url).port), '127.0.0.1');
      let answer = '';
      socket.on('data', (data) => {
        answer += data.toString();
      });
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
      socket.write('THIS IS NOT HTTP\r\n\r\n');
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    const odd = await call(sandbox.url, 'POST', '/restful/login/', { body: '\u0000\ud800{"username":' });
    expect([odd.status, odd.body.errorCode]).toEqual([400, 'INVALID_FORMAT']);
    const unicode = await call(sandbox.url, 'POST', path('emoji'), {
      token: advisor,
      body: { name: '😀\u2028' },
    });
    expect([unicode.status, unicode.body]).toEqual([201, { name: '😀\u2028' }]);
  });
});
