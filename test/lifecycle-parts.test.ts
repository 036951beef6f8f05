import { decodeJwt } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { userBudgetIssues } from '../shared/config/user-budgets.js';
import { DynamoTokenStore, tokenIdOf } from '../shared/tokens/index.js';
import { ledgerKeyFor } from '../shared/vend/ledger-key.js';
import { TokenStateCache } from '../shared/vend/token-state-cache.js';
import { startDynalite } from './support/dynalite.js';
import { credentialSet } from './support/refresher-harness.js';
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
  const secretId = 'token-broker/uat/advisor';
  it('is the token id for scope token, and for scope user the item release N-1 kept for the smallest set id of the secret', () => {
    const arn = `arn:aws:secretsmanager:eu-west-1:111111111111:secret:${secretId}`;
    const sets = [
      { id: 'uat-advisor-b', quotaScope: 'user' as const, secretId: `${arn}-AbC123`, rateLimits: {} },
      { id: 'uat-advisor', quotaScope: 'user' as const, secretId, rateLimits: {} },
      { id: 'uat-other', quotaScope: 'user' as const, secretId: `${secretId}-2`, rateLimits: {} },
    ];
    expect(userBudgetIssues(sets)).toEqual([]);
    expect(ledgerKeyFor({ id: 'uat-advisor', quotaScope: 'token', secretId }, '0123456789abcdef')).toBe(
      '0123456789abcdef',
    );
    // N-1's key for the set alone on its secret, and for every token of every set of one secret (however the
    // secret is spelt): the smallest id's. Another secret, another key.
    const user = ledgerKeyFor(sets[1] as (typeof sets)[number], '0123456789abcdef');
    expect(user).toBe('set-uat-advisor');
    expect(ledgerKeyFor(sets[1] as (typeof sets)[number], 'fedcba9876543210')).toBe(user);
    expect(ledgerKeyFor(sets[0] as (typeof sets)[number], 'x')).toBe(user);
    expect(ledgerKeyFor({ ...(sets[0] as (typeof sets)[number]), secretId: arn }, 'x')).toBe(user);
    expect(ledgerKeyFor(sets[2] as (typeof sets)[number], 'x')).toBe('set-uat-other');
    // A 63-character id still gives a valid ledger id (hashed as N-1 did).
    const long = 'a'.repeat(63);
    expect(ledgerKeyFor({ id: long, quotaScope: 'user', secretId: 'solo' }, 'x')).toMatch(rule);
  });
});

describe('the warm cache version check', () => {
  it('serves its entry when the version read fails (inside the TTL), and reads again when the version moved', async () => {
    const dynamo = await startDynalite();
    try {
      const clock = new ManualClock(START);
      const store = new DynamoTokenStore({
        client: dynamo.client,
        tableName: await dynamo.createTable('tokens'),
      });
      const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: 'https://vendor.example.com' });
      const take = (leaseId: string, now: number, expectedTokenId: string | null) =>
        store.takeLease({
          credentialSetId: set.id,
          holder: 'h',
          leaseId,
          now,
          leaseExpiresAt: now + 60_000,
          lastAttemptNoLaterThan: now,
          expectedTokenId,
        });
      expect((await take('l1', START, null)).taken).toBe(true);
      const exp = START / 1000 + 14_400;
      const token = {
        tokenId: tokenIdOf('token-a'),
        accessToken: 'token-a',
        exp,
        env: 'uat',
        obtainedAt: START,
        usableUntil: (exp - 300) * 1000,
        tenant: 't',
        companyKey: 'ck',
        executionPlatformKey: 'ep',
        userKey: 'uk',
        username: 'uat-advisor',
        roles: [],
        groups: [],
        defaultCompanyInventorySource: 'MARKET',
      };
      expect(await store.promote({ credentialSetId: set.id, leaseId: 'l1', now: START, token })).toBe(true);
      let failing = false;
      let versionReads = 0;
      const faulty = {
        read: (id: string, now: number) => store.read(id, now),
        readVersion: (id: string) => {
          versionReads++;
          return failing ? Promise.reject(new Error('injected: table unavailable')) : store.readVersion(id);
        },
      };
      const cache = new TokenStateCache({
        store: faulty,
        clock,
        ttlMs: 30_000,
        nearThresholdTtlMs: 1000,
        versionCheckMs: 1000,
      });
      expect((await cache.get(set)).source).toBe('store');
      failing = true;
      await clock.advance(2000);
      expect(await cache.get(set)).toMatchObject({
        source: 'memory',
        state: { current: { tokenId: token.tokenId } },
      });
      expect(versionReads).toBe(1);
      failing = false;
      await clock.advance(1000);
      expect((await cache.get(set)).source).toBe('memory');
      // Another process writes (a lease taken): the next check sees the version move and reads the item.
      expect((await take('l2', clock.now(), token.tokenId)).taken).toBe(true);
      expect((await cache.get(set)).source).toBe('memory'); // checked less than a second ago
      await clock.advance(1000);
      expect((await cache.get(set)).source).toBe('store');
      expect(versionReads).toBe(3);
    } finally {
      await dynamo.close();
    }
  });
});
