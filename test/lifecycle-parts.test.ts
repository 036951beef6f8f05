import { decodeJwt } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { ledgerKeyFor } from '../shared/vend/ledger-key.js';
import { call, tokenFor } from './support/sandbox-http.js';

const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const PATH = '/users/7/uat-advisor-tenant/serviceKey/c-1';
const PASSWORD = 'uat-advisor-sandbox-pw';

describe('vendor sandbox: the settings the token-lifecycle tests need', () => {
  let sandbox: Sandbox | undefined;
  afterEach(async () => {
    await sandbox?.close();
    sandbox = undefined;
  });

  it('rateLimitScope user: all tokens of one user share the limit; token: each has its own', async () => {
    const clock = new ManualClock(START);
    sandbox = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      limits: [{ limit: 3, windowSeconds: 60 }],
      rateLimitScope: 'user',
    });
    const url = sandbox.url;
    const a = await tokenFor(url, 'uat-advisor', PASSWORD);
    const b = await tokenFor(url, 'uat-advisor', PASSWORD);
    const statuses = [];
    for (const token of [a, b, a, b]) statuses.push((await call(url, 'GET', PATH, { token })).status);
    expect(statuses).toEqual([404, 404, 404, 429]);
    sandbox.update({ rateLimitScope: 'token' });
    await clock.advance(60_000);
    const perToken = [];
    for (const token of [a, a, a, b, b, b]) perToken.push((await call(url, 'GET', PATH, { token })).status);
    expect(perToken).toEqual([404, 404, 404, 404, 404, 404]);
  });

  it('envClaim: new tokens carry it and stay valid; loginOutage: logins 503, issued tokens work', async () => {
    const clock = new ManualClock(START);
    sandbox = await startSandbox({ environment: 'prod', clock, quiet: true, envClaim: 'PRODUCTION' });
    const url = sandbox.url;
    const token = await tokenFor(url, 'prod-advisor', 'prod-advisor-sandbox-pw');
    expect(decodeJwt(token).env).toBe('PRODUCTION');
    sandbox.update({ loginOutage: true });
    const login = await call(url, 'POST', '/restful/login/', {
      body: { username: 'prod-advisor', password: 'prod-advisor-sandbox-pw' },
    });
    expect([login.status, login.body.errorCode]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    const resource = await call(url, 'GET', '/users/7/prod-advisor-tenant/serviceKey/c-1', { token });
    expect(resource.status).not.toBe(401);
    expect(resource.status).not.toBe(503);
  });
});

describe('ledgerKeyFor', () => {
  const rule = /^[A-Za-z0-9_-]{1,64}$/;
  it('is the token id for scope token, and one key per set for scope user, always a valid ledger id', () => {
    expect(ledgerKeyFor({ id: 'uat-advisor', quotaScope: 'token' }, '0123456789abcdef')).toBe(
      '0123456789abcdef',
    );
    expect(ledgerKeyFor({ id: 'uat-advisor', quotaScope: 'user' }, '0123456789abcdef')).toBe(
      'set-uat-advisor',
    );
    expect(ledgerKeyFor({ id: 'uat-advisor', quotaScope: 'user' }, 'fedcba9876543210')).toBe(
      'set-uat-advisor',
    );
    const longId = `a${'-b'.repeat(31)}`;
    const long = ledgerKeyFor({ id: longId, quotaScope: 'user' }, '0123456789abcdef');
    expect(long).toMatch(rule);
    expect(long).not.toBe(ledgerKeyFor({ id: `${longId.slice(0, -1)}c`, quotaScope: 'user' }, 'x'));
    expect(ledgerKeyFor({ id: 'uat-advisor', quotaScope: 'user' }, 'x')).toMatch(rule);
  });
});
