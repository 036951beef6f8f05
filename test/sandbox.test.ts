import { randomBytes } from 'node:crypto';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { TokenAuthority } from '../sandbox/tokens.js';
import { defaultSandboxUsers } from '../sandbox/users.js';
import { ManualClock } from '../shared/clock.js';
import { call, login, tokenFor } from './support/sandbox-http.js';

const [advisor, execution] = defaultSandboxUsers('uat') as [
  ReturnType<typeof defaultSandboxUsers>[0],
  ReturnType<typeof defaultSandboxUsers>[0],
];
const [prodAdvisor] = defaultSandboxUsers('prod');
const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const resourcePath = `/users/7/${advisor.tenant}/serviceKey/client-1`;

describe('vendor sandbox: login and tokens', () => {
  const clock = new ManualClock(START);
  let uat: Sandbox;
  let prod: Sandbox;

  beforeAll(async () => {
    uat = await startSandbox({ environment: 'uat', clock, quiet: true });
    prod = await startSandbox({ environment: 'prod', clock, quiet: true });
  });
  afterAll(async () => {
    await uat.close();
    await prod.close();
  });
  afterEach(() => {
    clock.set(START);
    uat.update({ invalidatePreviousTokenOnLogin: false, quiet: true });
  });

  it('logs in with the §2 body, the vendor clock in Date, and a request id', async () => {
    const reply = await login(uat.url, advisor.username, advisor.password);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('date')).toBe(new Date(START).toUTCString());
    expect(reply.headers.get('x-request-id')).toMatch(/^req-[0-9a-f]{16}$/);
    expect(reply.body).toEqual({
      userDetails: { username: advisor.username, userKey: advisor.userKey, groups: advisor.groups },
      roles: advisor.roles,
      accessToken: expect.any(String),
      refreshToken: expect.any(String),
      executionPlatformKey: advisor.executionPlatformKey,
      tenant: advisor.tenant,
      defaultCompanyInventorySource: 'MARKET',
      status: 'SUCCESS',
      companyKey: advisor.companyKey,
      exp: START / 1000 + 14_400,
    });
    expect(reply.body.refreshToken).not.toBe(reply.body.accessToken);
  });

  it('puts exp, iat, env, sub, username, tenant and a unique jti in the token', async () => {
    clock.set(START + 1_500);
    const first = await login(uat.url, execution.username, execution.password);
    const second = await login(uat.url, execution.username, execution.password);
    const claims = decodeJwt(first.body.accessToken);
    expect(claims).toMatchObject({
      iat: START / 1000 + 1,
      exp: START / 1000 + 1 + 14_400,
      env: 'uat',
      sub: execution.username,
      username: execution.username,
      tenant: execution.tenant,
    });
    expect(claims.exp).toBe(first.body.exp);
    expect(claims.jti).toEqual(expect.any(String));
    expect(decodeJwt(second.body.accessToken).jti).not.toBe(claims.jti);
  });

  it('accepts the login path with and without its trailing slash', async () => {
    const reply = await call(uat.url, 'POST', '/restful/login', {
      body: { username: advisor.username, password: advisor.password },
    });
    expect(reply.status).toBe(200);
  });

  it('answers 401 INVALID_CREDENTIALS with a §7 body for a wrong password or an unknown user', async () => {
    for (const [username, password] of [
      [advisor.username, 'wrong'],
      ['nobody', advisor.password],
      [prodAdvisor?.username ?? '', prodAdvisor?.password ?? ''],
    ] as const) {
      const reply = await login(uat.url, username, password);
      expect(reply.status).toBe(401);
      expect(reply.body).toEqual({
        errorStatus: 401,
        errorCode: 'INVALID_CREDENTIALS',
        errorMessage: expect.any(String),
        timestamp: new Date(START).toISOString(),
        requestId: reply.headers.get('x-request-id'),
      });
      expect(reply.text).not.toContain(password);
    }
  });

  it('answers 400 INVALID_FORMAT for a body that is not JSON, MISSING_REQUIRED_FIELD for absent fields', async () => {
    const notJson = await call(uat.url, 'POST', '/restful/login/', { body: '{"username": "uat-advisor",' });
    expect([notJson.status, notJson.body.errorCode]).toEqual([400, 'INVALID_FORMAT']);
    for (const body of [
      { username: advisor.username },
      { password: advisor.password },
      { username: 42, password: advisor.password },
      { username: advisor.username, password: '' },
      [advisor.username, advisor.password],
      'null',
    ]) {
      const reply = await call(uat.url, 'POST', '/restful/login/', { body });
      expect([reply.status, reply.body.errorCode, reply.body.errorStatus]).toEqual([
        400,
        'MISSING_REQUIRED_FIELD',
        400,
      ]);
    }
  });

  it('answers TOKEN_MISSING, TOKEN_INVALID for malformed or tampered tokens', async () => {
    const token = await tokenFor(uat.url, advisor.username, advisor.password);
    const [head, payload, signature] = token.split('.') as [string, string, string];
    const otherTenant = Buffer.from(
      JSON.stringify({ ...decodeJwt(token), tenant: execution.tenant }),
      'utf8',
    ).toString('base64url');
    const flipped = `${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`;
    const cases: [Record<string, string>, string][] = [
      [{}, 'TOKEN_MISSING'],
      [{ Authorization: '' }, 'TOKEN_MISSING'],
      [{ Authorization: '   ' }, 'TOKEN_MISSING'],
      [{ Authorization: 'Bearer ' }, 'TOKEN_MISSING'],
      [{ Authorization: `Basic ${token}` }, 'TOKEN_INVALID'],
      [{ Authorization: token }, 'TOKEN_INVALID'],
      [{ Authorization: 'Bearer not-a-jwt' }, 'TOKEN_INVALID'],
      [{ Authorization: `Bearer ${head}.${otherTenant}.${signature}` }, 'TOKEN_INVALID'],
      [{ Authorization: `Bearer ${head}.${payload}.${flipped}` }, 'TOKEN_INVALID'],
    ];
    for (const [headers, code] of cases) {
      const reply = await call(uat.url, 'GET', resourcePath, { headers });
      expect([reply.status, reply.body.errorCode]).toEqual([401, code]);
      expect(reply.headers.get('x-ratelimit-limit')).toBeNull();
    }
    const good = await call(uat.url, 'GET', resourcePath, { token });
    expect(good.status).toBe(404);
  });

  it('rejects a token signed with a key the sandbox did not issue it with', async () => {
    const forged = await new SignJWT({
      ...decodeJwt(await tokenFor(uat.url, advisor.username, advisor.password)),
    })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(randomBytes(32));
    const reply = await call(uat.url, 'GET', resourcePath, { token: forged });
    expect([reply.status, reply.body.errorCode]).toEqual([401, 'TOKEN_INVALID']);
  });

  it('answers TOKEN_EXPIRED from exp on, and accepts the token one second before', async () => {
    const token = await tokenFor(uat.url, advisor.username, advisor.password);
    await clock.advance(14_399_000);
    expect((await call(uat.url, 'GET', resourcePath, { token })).status).toBe(404);
    await clock.advance(1_000);
    const reply = await call(uat.url, 'GET', resourcePath, { token });
    expect([reply.status, reply.body.errorCode]).toEqual([401, 'TOKEN_EXPIRED']);
  });

  it('rejects a token of the other environment with 401 TOKEN_INVALID', async () => {
    const prodToken = await tokenFor(prod.url, 'prod-advisor', 'prod-advisor-sandbox-pw');
    const uatToken = await tokenFor(uat.url, advisor.username, advisor.password);
    const prodPath = `/users/7/${decodeJwt(prodToken).tenant}/serviceKey/client-1`;
    expect(await call(uat.url, 'GET', prodPath, { token: prodToken })).toMatchObject({
      status: 401,
      body: { errorCode: 'TOKEN_INVALID' },
    });
    expect(await call(prod.url, 'GET', resourcePath, { token: uatToken })).toMatchObject({
      status: 401,
      body: { errorCode: 'TOKEN_INVALID' },
    });
    expect((await call(prod.url, 'GET', prodPath, { token: prodToken })).status).toBe(404);
  });

  it('checks the env claim even when the signing key is shared', async () => {
    const key = randomBytes(32);
    const prodAuthority = new TokenAuthority('prod', key);
    const uatAuthority = new TokenAuthority('uat', key);
    const { token } = await prodAuthority.issue(advisor, START, 3600, false);
    expect(await prodAuthority.verify(token, START)).toMatchObject({ ok: true });
    expect(await uatAuthority.verify(token, START)).toMatchObject({
      ok: false,
      code: 'TOKEN_INVALID',
      reason: 'token belongs to another environment',
    });
  });

  it('keeps earlier tokens valid after a new login by default', async () => {
    const first = await tokenFor(uat.url, advisor.username, advisor.password);
    const second = await tokenFor(uat.url, advisor.username, advisor.password);
    expect((await call(uat.url, 'GET', resourcePath, { token: first })).status).toBe(404);
    expect((await call(uat.url, 'GET', resourcePath, { token: second })).status).toBe(404);
  });

  it('invalidates the user’s earlier tokens on login when told to, and only that user’s', async () => {
    uat.update({ invalidatePreviousTokenOnLogin: true });
    const other = await tokenFor(uat.url, execution.username, execution.password);
    const first = await tokenFor(uat.url, advisor.username, advisor.password);
    const second = await tokenFor(uat.url, advisor.username, advisor.password);
    const stale = await call(uat.url, 'GET', resourcePath, { token: first });
    expect([stale.status, stale.body.errorCode]).toEqual([401, 'TOKEN_INVALID']);
    expect((await call(uat.url, 'GET', resourcePath, { token: second })).status).toBe(404);
    const otherPath = `/users/7/${execution.tenant}/serviceKey/client-1`;
    expect((await call(uat.url, 'GET', otherPath, { token: other })).status).toBe(404);
  });

  it('logs one line per request with the jti, never the token or the password', async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      uat.update({ quiet: false });
      const reply = await login(uat.url, advisor.username, advisor.password);
      const token = reply.body.accessToken as string;
      await call(uat.url, 'GET', resourcePath, { token });
      await call(uat.url, 'GET', resourcePath);
      const jti = String(decodeJwt(token).jti);
      expect(lines).toHaveLength(3);
      expect(lines[0]).toMatch(new RegExp(`POST /restful/login/ 200 jti=${jti}\\n$`));
      expect(lines[1]).toMatch(new RegExp(`GET ${resourcePath} 404 jti=${jti}\\n$`));
      expect(lines[2]).toMatch(/ 401 jti=none\n$/);
      const all = lines.join('');
      expect(all).not.toContain(token);
      expect(all).not.toContain(token.split('.')[2]);
      expect(all).not.toContain(advisor.password);
    } finally {
      spy.mockRestore();
    }
  });
});
