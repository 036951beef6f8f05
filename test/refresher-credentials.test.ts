import { beforeEach, describe, expect, it } from 'vitest';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { credentialsCooldownSeconds, health, softThresholdSeconds } from '../shared/tokens/index.js';
import {
  expectNoSecrets,
  refresherSuite,
  sandboxPasswords,
  VENDOR_CLIENT_ATTEMPTS,
  type World,
} from './support/refresher-harness.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const PERIOD = 300;
const WRONG = 'wrong-password-b7c2';

const suite = refresherSuite(T0);
const { clock } = suite;
let world: World;
let set: CredentialSetConfig;

beforeEach(async () => {
  suite.reset();
  ({ world, set } = await suite.advisorWorld({ storeCredentials: false }));
});

const attempts = () => suite.uat.stats().logins['uat-advisor']?.attempts ?? 0;

describe('a wrong password', () => {
  it('gets one attempt per cooldown, the cooldown growing with each rejection of that version, however often it is asked, and an immediate one when the secret changes', async () => {
    const v1 = world.secrets.put(set.secretId, { username: 'uat-advisor', password: WRONG });
    const invocations = Array.from({ length: 5 }, (_, i) => world.refresher(`container-${i}`, [set]));
    const vend = world.refresher('vend-side', [set]);
    const TICKS = 23; // almost two hours, ending inside the last cooldown
    const attemptTicks: number[] = [];
    for (let tick = 0; tick < TICKS; tick++) {
      const before = attempts();
      await Promise.all(invocations.map((r) => r.runScheduled()));
      // Between runs the vend API keeps asking for a token.
      await clock.advance(150_000);
      const outcome = await vend.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' });
      expect(outcome).toMatchObject({ status: 'UNAVAILABLE', errorCode: 'INVALID_CREDENTIALS' });
      await clock.advance(150_000);
      if (attempts() > before) attemptTicks.push(tick);
    }
    // INVALID_CREDENTIALS is final for the client: one HTTP login per attempt. The waits grow: 15 min, then
    // 1 h, then 4 h (the third cooldown outlasts these two hours).
    expect([1, 2, 3].map((n) => credentialsCooldownSeconds(n, set.refresh))).toEqual([900, 3600, 14_400]);
    expect(attemptTicks).toEqual([0, 900 / PERIOD, (900 + 3600) / PERIOD]);
    expect(attempts()).toBe(attemptTicks.length);
    expect(world.telemetry.sum(Metric.CredentialsRejected, { CredentialSet: set.id })).toBe(
      attemptTicks.length,
    );
    expect(world.telemetry.sum(Metric.VendorUnavailable)).toBe(0);

    // The last attempt was at the last cooldown tick; a run later, the set still cools down and says so.
    const state = await world.store.read(set.id, clock.now());
    expect(state?.failure).toMatchObject({
      errorCode: 'INVALID_CREDENTIALS',
      kind: 'REJECTED',
      secretVersion: v1,
      rejectionsOfVersion: 3,
    });
    expect(state?.failure?.requestId).toMatch(/^req-/);
    expect(health(state, clock.now(), set)).toMatchObject({
      state: 'CREDENTIALS_REJECTED',
      consecutiveFailures: attemptTicks.length,
      lastError: { code: 'INVALID_CREDENTIALS' },
    });
    const cooling = state?.failure?.cooldownUntil ?? 0;
    expect(cooling).toBeGreaterThan(clock.now());
    const asked = await vend.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' });
    expect(asked).toEqual({
      status: 'UNAVAILABLE',
      errorCode: 'INVALID_CREDENTIALS',
      retryAfterSeconds: Math.ceil((cooling - clock.now()) / 1000),
    });
    // The secret is read again on every run while it cools down (that is how a rotation is noticed).
    const readsBefore = world.secrets.reads();
    await invocations[0]?.runScheduled();
    expect(world.secrets.reads()).toBe(readsBefore + 1);
    expect(attempts()).toBe(attemptTicks.length);

    // Someone fixes the secret: the very next run logs in, cooldown or not.
    world.storeCredentialsOf(set, 'uat-advisor', suite.uat);
    expect(clock.now()).toBeLessThan(cooling);
    const fixed = await invocations[1]?.runScheduled();
    expect(fixed?.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
    expect(suite.uat.stats().logins['uat-advisor']).toMatchObject({
      successes: 1,
      failures: attemptTicks.length,
    });
    const healed = await world.store.read(set.id, clock.now());
    expect(healed?.failure).toBeUndefined();
    expect(health(healed, clock.now(), set).state).toBe('HEALTHY');
    expectNoSecrets(world.telemetry.dump(), [...sandboxPasswords(), WRONG]);
  });

  it('keeps serving the old token while a rotated-away password is rejected', async () => {
    world.storeCredentialsOf(set, 'uat-advisor', suite.uat);
    const refresher = world.refresher('p1', [set]);
    await refresher.runScheduled();
    const old = (await world.store.read(set.id, clock.now()))?.current;
    world.secrets.put(set.secretId, { username: 'uat-advisor', password: WRONG });
    clock.set(T0 + (14_400 - softThresholdSeconds(set, 14_400)) * 1000);
    const run = await refresher.runScheduled();
    expect(run.sets[0]).toMatchObject({
      action: 'FAILED',
      errorCode: 'INVALID_CREDENTIALS',
      usable: true,
      tokenId: old?.tokenId,
    });
    const state = await world.store.read(set.id, clock.now());
    expect(state?.current?.tokenId).toBe(old?.tokenId);
    expect(health(state, clock.now(), set).state).toBe('DEGRADED');
    expect(await refresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' })).toMatchObject({
      status: 'CURRENT',
      tokenId: old?.tokenId,
      loggedIn: false,
    });
  });

  it('cools down on a malformed secret without calling the vendor, and retries on its next version', async () => {
    world.secrets.put(set.secretId, '{"username": "uat-advisor"}');
    const refresher = world.refresher('p1', [set]);
    const run = await refresher.runScheduled();
    expect(run.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'CREDENTIALS_MALFORMED' });
    expect(suite.uat.stats().loginRequests).toBe(0);
    await clock.advance(PERIOD * 1000);
    expect((await refresher.runScheduled()).sets[0]?.action).toBe('BLOCKED');
    world.storeCredentialsOf(set, 'uat-advisor', suite.uat);
    expect((await refresher.runScheduled()).sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
    expect(suite.uat.stats().loginRequests).toBe(1);
  });
});

describe('a vendor failure that is not about the credentials', () => {
  it('backs off below the schedule period and is never cooled down like a wrong password', async () => {
    world.storeCredentialsOf(set, 'uat-advisor', suite.uat);
    const refresher = world.refresher('p1', [set]);
    suite.uat.inject({ target: 'login', status: 503, count: VENDOR_CLIENT_ATTEMPTS });
    expect((await refresher.runScheduled()).sets[0]).toMatchObject({
      action: 'FAILED',
      errorCode: 'SERVICE_UNAVAILABLE',
    });
    const failure = (await world.store.read(set.id, clock.now()))?.failure;
    expect(failure).toMatchObject({ kind: 'TRANSIENT', consecutive: 1 });
    expect(failure?.cooldownUntil).toBe(T0 + set.refresh.retryBackoffBaseSeconds * 1000);
    // On demand, within the backoff: told when to come back, no login.
    expect(await refresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' })).toMatchObject({
      status: 'UNAVAILABLE',
      errorCode: 'SERVICE_UNAVAILABLE',
      retryAfterSeconds: set.refresh.retryBackoffBaseSeconds,
    });
    expect(suite.uat.stats().loginRequests).toBe(VENDOR_CLIENT_ATTEMPTS);
    await clock.advance(set.refresh.retryBackoffBaseSeconds * 1000);
    expect(await refresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' })).toMatchObject({
      status: 'CURRENT',
      loggedIn: true,
    });
  });
});
