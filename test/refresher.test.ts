import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import {
  health,
  InvalidRefreshRequestError,
  type RefreshOutcome,
  softThresholdSeconds,
  UnknownCredentialSetError,
} from '../shared/tokens/index.js';
import { VendorApiError, VendorClient } from '../shared/vendor-client/index.js';
import {
  credentialSet,
  expectNoSecrets,
  refresherSuite,
  sandboxPasswords,
  type World,
  whileAdvancing,
} from './support/refresher-harness.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LIFETIME = 14_400;

const suite = refresherSuite(T0, { tokenLifetimeSeconds: LIFETIME });
const { clock } = suite;
let world: World;
let set: CredentialSetConfig;

beforeEach(async () => {
  suite.reset({ outage: false, invalidatePreviousTokenOnLogin: false });
  ({ world, set } = await suite.advisorWorld());
});

const successes = (sandbox: Sandbox, username: string) => sandbox.stats().logins[username]?.successes ?? 0;

describe('a scheduled run', () => {
  it('logs in a set with no token, stores it with the login-result fields, and leaves a fresh one alone', async () => {
    const refresher = world.refresher('p1', [set]);
    const first = await refresher.runScheduled();
    expect(first.sets).toEqual([
      expect.objectContaining({
        credentialSetId: set.id,
        action: 'LOGGED_IN',
        // A second less than the lifetime: the vendor's Date has whole seconds: the broker takes its clock as far ahead as that allows.
        validitySeconds: LIFETIME - 1,
        usable: true,
      }),
    ]);
    const state = await world.store.read(set.id, clock.now());
    const user = defaultSandboxUsers('uat')[0];
    expect(state?.current).toMatchObject({
      tokenId: first.sets[0]?.tokenId,
      exp: T0 / 1000 + LIFETIME,
      issuedAt: T0 / 1000,
      env: 'uat',
      obtainedAt: T0,
      usableUntil: (T0 / 1000 + LIFETIME - 300 - 1) * 1000,
      tenant: user?.tenant,
      companyKey: user?.companyKey,
      executionPlatformKey: user?.executionPlatformKey,
      userKey: user?.userKey,
      username: 'uat-advisor',
      roles: user?.roles,
      groups: user?.groups,
      defaultCompanyInventorySource: 'MARKET',
      usable: true,
    });
    expect(health(state, clock.now(), set)).toMatchObject({
      state: 'HEALTHY',
      validitySeconds: LIFETIME - 1,
    });

    await clock.advance(300_000);
    const second = await refresher.runScheduled();
    expect(second.sets[0]).toMatchObject({ action: 'FRESH', tokenId: first.sets[0]?.tokenId });
    expect(successes(suite.uat, 'uat-advisor')).toBe(1);
    expect(world.telemetry.sum(Metric.LoginSuccess, { CredentialSet: set.id })).toBe(1);
    expect(
      world.telemetry.metrics.filter((m) => m.name === Metric.TokenValiditySeconds).map((m) => m.value),
    ).toEqual([LIFETIME - 1, LIFETIME - 1 - 300]);
  });

  it('re-logs in once the soft threshold is reached, and keeps the previous token until its exp', async () => {
    const refresher = world.refresher('p1', [set]);
    const first = await refresher.runScheduled();
    const soft = softThresholdSeconds(set, LIFETIME);
    // One second before the threshold: still fresh. The vendor's clock is taken a second ahead of what its Date
    // says (its whole second), so by ours the threshold comes a second before LIFETIME - soft.
    clock.set(T0 + (LIFETIME - soft - 2) * 1000);
    expect((await refresher.runScheduled()).sets[0]?.action).toBe('FRESH');
    clock.set(T0 + (LIFETIME - soft - 1) * 1000);
    const second = await refresher.runScheduled();
    expect(second.sets[0]).toMatchObject({ action: 'LOGGED_IN' });
    expect(second.sets[0]?.tokenId).not.toBe(first.sets[0]?.tokenId);
    const state = await world.store.read(set.id, clock.now());
    expect(state?.previous?.tokenId).toBe(first.sets[0]?.tokenId);
    expect(state?.current?.tokenId).toBe(second.sets[0]?.tokenId);
    expect(successes(suite.uat, 'uat-advisor')).toBe(2);
  });

  it('says which sets it could not serve without stopping the others, and never logs a token or password', async () => {
    const broken = credentialSet({
      id: 'uat-broken',
      vendorBaseUrl: suite.uat.url,
      secretId: 'token-broker/absent',
    });
    const summary = await world.refresher('p1', [set, broken]).runScheduled();
    expect(summary.sets.map((s) => [s.credentialSetId, s.action, s.errorCode])).toEqual([
      ['uat-advisor', 'LOGGED_IN', undefined],
      ['uat-broken', 'FAILED', 'CREDENTIALS_UNAVAILABLE'],
    ]);
    expect(world.telemetry.sum(Metric.NoUsableToken, { CredentialSet: 'uat-broken' })).toBe(1);
    expect(world.telemetry.logs).toContainEqual(
      expect.objectContaining({
        level: 'error',
        message: 'no usable token',
        attributes: expect.objectContaining({ credentialSetId: 'uat-broken' }),
      }),
    );
    expectNoSecrets(world.telemetry.dump() + JSON.stringify(summary), sandboxPasswords());
  });
});

describe('the token check', () => {
  it('never makes a token of the other environment usable', async () => {
    // A prod vendor whose user has the very credentials of the suite.uat set: the login succeeds, the token says prod.
    const prod = await startSandbox({
      environment: 'prod',
      clock,
      quiet: true,
      users: defaultSandboxUsers('uat').slice(0, 1),
    });
    try {
      const misdirected = credentialSet({ id: 'uat-advisor', environment: 'uat', vendorBaseUrl: prod.url });
      const refresher = world.refresher('p1', [misdirected]);
      const summary = await refresher.runScheduled();
      expect(summary.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'ENV_MISMATCH', usable: false });
      expect(successes(prod, 'uat-advisor')).toBe(1);

      const state = await world.store.read(misdirected.id, clock.now());
      expect(state?.current).toBeUndefined();
      expect(state?.failure).toMatchObject({ errorCode: 'ENV_MISMATCH', kind: 'REJECTED' });
      expect(health(state, clock.now(), misdirected).state).toBe('ENV_MISMATCH');
      expect(
        await refresher.refreshOne({ credentialSetId: misdirected.id, reason: 'NO_USABLE_TOKEN' }),
      ).toEqual({
        status: 'UNAVAILABLE',
        errorCode: 'ENV_MISMATCH',
        retryAfterSeconds: misdirected.refresh.credentialsCooldownSeconds,
      });
      expect(world.telemetry.sum(Metric.EnvMismatch, { CredentialSet: misdirected.id })).toBe(1);
      // Not even stored somewhere as information: the table holds no JWT at all.
      const scan = await world.dynamo.client.send(new ScanCommand({ TableName: world.table }));
      expect(JSON.stringify(scan.Items)).not.toMatch(/eyJ/);

      // Runs every 5 minutes for an hour: one attempt per cooldown, never a usable token.
      for (let tick = 1; tick <= 12; tick++) {
        await clock.advance(300_000);
        expect((await refresher.runScheduled()).sets[0]?.usable).toBe(false);
      }
      const cooldownTicks = misdirected.refresh.credentialsCooldownSeconds / 300;
      expect(prod.stats().loginRequests).toBe(Math.floor(12 / cooldownTicks) + 1);
    } finally {
      await prod.close();
    }
  });
});

describe('on demand', () => {
  it('answers 20 concurrent callers of one process on a cold cache with one login', async () => {
    const refresher = world.refresher('p1', [set]);
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () =>
        refresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' }),
      ),
    );
    expect(successes(suite.uat, 'uat-advisor')).toBe(1);
    expect(suite.uat.stats().loginRequests).toBe(1);
    const tokenIds = new Set(outcomes.map((o) => (o.status === 'CURRENT' ? o.tokenId : o.errorCode)));
    expect(tokenIds.size).toBe(1);
    expect(outcomes.filter((o) => o.status === 'CURRENT' && o.loggedIn)).toHaveLength(1);
  });

  it('answers 20 concurrent callers in 20 processes on a cold cache with one login', async () => {
    const refreshers = Array.from({ length: 20 }, (_, i) => world.refresher(`p${i}`, [set]));
    const outcomes = await whileAdvancing(
      clock,
      Promise.all(
        refreshers.map((r) =>
          r.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN', minValiditySeconds: 600 }),
        ),
      ),
    );
    expect(successes(suite.uat, 'uat-advisor')).toBe(1);
    expect(new Set(outcomes.map((o) => (o.status === 'CURRENT' ? o.tokenId : o.errorCode))).size).toBe(1);
    expect(outcomes.every((o) => o.status === 'CURRENT')).toBe(true);
    expect(world.telemetry.sum(Metric.LeaseContention)).toBeGreaterThan(0);
  });

  it('answers from the store when the token has the validity asked for, and re-logs in when it has not', async () => {
    const refresher = world.refresher('p1', [set]);
    await refresher.runScheduled();
    const soft = softThresholdSeconds(set, LIFETIME);
    const ask = (minValiditySeconds?: number) =>
      refresher.refreshOne({
        credentialSetId: set.id,
        reason: 'NO_USABLE_TOKEN',
        ...(minValiditySeconds === undefined ? {} : { minValiditySeconds }),
      });
    const firstExp = T0 / 1000 + LIFETIME;
    // Above the soft threshold the token is fresh, even for a caller asking for more than any token has.
    clock.set((firstExp - soft - 1) * 1000);
    expect(await ask(soft)).toEqual(
      expect.objectContaining({ status: 'CURRENT', loggedIn: false, exp: firstExp }),
    );
    expect(await ask(LIFETIME)).toEqual(
      expect.objectContaining({ status: 'CURRENT', loggedIn: false, exp: firstExp }),
    );
    // Due but usable: enough for the default ask (the scheduled run re-logs in), not for more than it has.
    clock.set((firstExp - soft + 60) * 1000);
    expect(await ask()).toEqual(
      expect.objectContaining({ status: 'CURRENT', loggedIn: false, exp: firstExp }),
    );
    expect(await ask(soft - 30)).toEqual(
      expect.objectContaining({ status: 'CURRENT', loggedIn: true, exp: clock.now() / 1000 + LIFETIME }),
    );
    expect(successes(suite.uat, 'uat-advisor')).toBe(2);
  });

  it('refuses a malformed request or an unknown set, writing nothing', async () => {
    const refresher = world.refresher('p1', [set]);
    const jwtLike = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
    const error = await refresher
      .refreshOne({ credentialSetId: set.id, reason: 'TOKEN_REJECTED', rejectedTokenId: jwtLike })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRefreshRequestError);
    expect((error as Error).message).toContain('request.rejectedTokenId');
    expect(`${String(error)} ${JSON.stringify(error)}`).not.toContain(jwtLike);
    await expect(
      refresher.refreshOne({ credentialSetId: set.id, reason: 'SOMETHING' } as never),
    ).rejects.toBeInstanceOf(InvalidRefreshRequestError);
    await expect(
      refresher.refreshOne({ credentialSetId: 'nope', reason: 'NO_USABLE_TOKEN' }),
    ).rejects.toBeInstanceOf(UnknownCredentialSetError);
    const scan = await world.dynamo.client.send(new ScanCommand({ TableName: world.table }));
    expect(scan.Count).toBe(0);
    expect(suite.uat.stats().loginRequests).toBe(0);
  });
});

describe('a vendor that invalidates the previous token on login', () => {
  const probe = (client: VendorClient, token: string) =>
    client
      .request({
        method: 'GET',
        path: `/users/1/${defaultSandboxUsers('uat')[0]?.tenant}/serviceKey/abc`,
        token,
        retry: false,
      })
      .then((r) => r.status)
      .catch((e: unknown) => (e instanceof VendorApiError ? e.code : 'ERROR'));

  it('gives the current token to a consumer reporting the previous one, and re-logs in once for 20 reporting the current one', async () => {
    suite.uat.update({ invalidatePreviousTokenOnLogin: true });
    const vendor = new VendorClient({ baseUrl: suite.uat.url, clock, retry: { maxAttempts: 1 } });
    const refresher = world.refresher('p1', [set]);
    await refresher.runScheduled();
    const a = await world.store.read(set.id, clock.now());
    clock.set(T0 + (LIFETIME - softThresholdSeconds(set, LIFETIME)) * 1000);
    await refresher.runScheduled();
    const b = await world.store.read(set.id, clock.now());
    const [tokenA, tokenB] = [a?.current, b?.current];
    if (!tokenA || !tokenB) throw new Error('expected two tokens');
    expect(b?.previous?.tokenId).toBe(tokenA.tokenId);
    // The vendor really has invalidated A, and B works.
    expect(await probe(vendor, tokenA.accessToken)).toBe('TOKEN_INVALID');
    expect(await probe(vendor, tokenB.accessToken)).toBe('RESOURCE_NOT_FOUND');
    const loginsBefore = suite.uat.stats().loginRequests;

    const forPrevious = await refresher.refreshOne({
      credentialSetId: set.id,
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: tokenA.tokenId,
    });
    expect(forPrevious).toEqual({
      status: 'CURRENT',
      tokenId: tokenB.tokenId,
      exp: tokenB.exp,
      loggedIn: false,
    });
    expect(suite.uat.stats().loginRequests).toBe(loginsBefore);

    // Something invalidated B (say, a login elsewhere): 20 consumers in 20 processes report it at once.
    await clock.advance(120_000);
    const reporters = Array.from({ length: 20 }, (_, i) => world.refresher(`consumer-side-${i}`, [set]));
    const outcomes: RefreshOutcome[] = await whileAdvancing(
      clock,
      Promise.all(
        reporters.map((r) =>
          r.refreshOne({
            credentialSetId: set.id,
            reason: 'TOKEN_REJECTED',
            rejectedTokenId: tokenB.tokenId,
          }),
        ),
      ),
    );
    expect(suite.uat.stats().loginRequests).toBe(loginsBefore + 1);
    const c = (await world.store.read(set.id, clock.now()))?.current;
    expect(c && c.tokenId !== tokenB.tokenId).toBe(true);
    expect(outcomes.every((o) => o.status === 'CURRENT' && o.tokenId === c?.tokenId)).toBe(true);
    expect(outcomes.filter((o) => o.status === 'CURRENT' && o.loggedIn)).toHaveLength(1);
    expect(await probe(vendor, c?.accessToken ?? '')).toBe('RESOURCE_NOT_FOUND');

    // And 20 more in one process, reporting C together: one login again.
    const one = world.refresher('p-single', [set]);
    await clock.advance(120_000);
    const again = await Promise.all(
      Array.from({ length: 20 }, () =>
        one.refreshOne({
          credentialSetId: set.id,
          reason: 'TOKEN_REJECTED',
          rejectedTokenId: c?.tokenId ?? '',
        }),
      ),
    );
    expect(suite.uat.stats().loginRequests).toBe(loginsBefore + 2);
    expect(new Set(again.map((o) => (o.status === 'CURRENT' ? o.tokenId : 'none'))).size).toBe(1);
    expectNoSecrets(world.telemetry.dump() + JSON.stringify(outcomes), sandboxPasswords());
  });
});
