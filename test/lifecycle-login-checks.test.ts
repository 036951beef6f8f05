import { beforeEach, describe, expect, it } from 'vitest';
import { startSandbox } from '../sandbox/index.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { hardFloorSeconds, softThresholdSeconds, validitySeconds } from '../shared/tokens/index.js';
import { credentialSet, refresherSuite, type World } from './support/refresher-harness.js';

/**
 * What a fresh login must pass before it becomes current: the env claim (configurable, case-insensitive), the
 * vendor clock skew bound, and the thresholds of the token's own lifetime. The sandbox over HTTP, dynalite.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const suite = refresherSuite(T0);
const { clock } = suite;
let world: World;
let set: CredentialSetConfig;

beforeEach(async () => {
  suite.reset({ envClaim: 'uat', clockOffsetSeconds: 0, tokenLifetimeSeconds: 14_400 });
  ({ world, set } = await suite.advisorWorld());
});

describe('the env claim', () => {
  it('is compared case-insensitively with the default (the environment name)', async () => {
    suite.uat.update({ envClaim: 'UAT' });
    const run = await world.refresher('p1', [set]).runScheduled();
    expect(run.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
  });

  it('accepts the values configured for the environment, and still discards any other and alarms', async () => {
    const prod = await startSandbox({ environment: 'prod', clock, quiet: true, envClaim: 'Production' });
    try {
      const base = { id: 'prod-advisor', environment: 'prod' as const, vendorBaseUrl: prod.url };
      const strict = credentialSet(base);
      world.storeCredentialsOf(strict, 'prod-advisor', prod);
      // The default expects "prod": "Production" is another environment as far as it knows.
      const refused = await world.refresher('p1', [strict]).runScheduled();
      expect(refused.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'ENV_MISMATCH', usable: false });
      expect(world.telemetry.sum(Metric.EnvMismatch, { CredentialSet: 'prod-advisor' })).toBe(1);
      expect((await world.store.read('prod-advisor', clock.now()))?.current).toBeUndefined();

      // Configured for this vendor: the same claim is accepted (a configuration fix is not held back a day:
      // only a rejected password escalates its cooldown, so this set waits the flat 15 minutes).
      const configured = credentialSet({ ...base, expectedEnvClaims: ['prod', 'production'] });
      const failure = (await world.store.read('prod-advisor', clock.now()))?.failure;
      expect(failure?.cooldownUntil).toBe(clock.now() + 900_000);
      expect(failure?.rejectionsOfVersion).toBeUndefined();
      await clock.advance(900_000);
      const accepted = await world.refresher('p2', [configured]).runScheduled();
      expect(accepted.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });

      prod.update({ envClaim: 'staging' });
      await clock.advance(3 * 3600 * 1000 + 900_000); // due again
      const mismatch = await world.refresher('p3', [configured]).runScheduled();
      expect(mismatch.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'ENV_MISMATCH' });
      // The staging token was discarded; the good one is still current and served.
      expect(mismatch.sets[0]?.tokenId).toBe(accepted.sets[0]?.tokenId);
      expect(world.telemetry.sum(Metric.EnvMismatch, { CredentialSet: 'prod-advisor' })).toBe(2);
    } finally {
      await prod.close();
    }
  });
});

describe('the vendor clock', () => {
  it('is measured at login and kept with the token: validity is what the vendor says is left', async () => {
    for (const offset of [400, -400]) {
      suite.reset({ clockOffsetSeconds: offset });
      ({ world, set } = await suite.advisorWorld());
      await world.refresher('p1', [set]).runScheduled();
      const current = (await world.store.read(set.id, clock.now()))?.current;
      // The Date header has whole seconds: a vendor exactly `offset` ahead cannot be told from one up to a
      // second further ahead (the login took no time here), and the broker takes the furthest.
      expect(current?.vendorClockSkewSeconds).toBe(offset + 1);
      expect(current?.lifetimeSeconds).toBe(14_400);
      // The vendor issued exp = its now + 4 h; on its clock 4 h are left, whatever ours says: never more.
      expect(current?.exp).toBe(T0 / 1000 + offset + 14_400);
      expect(validitySeconds(current, clock.now())).toBe(14_400 - 1);
      // Usable until the vendor's clock may reach exp − 300 s: T0 + 14 099 s by ours, either way.
      expect(current?.usableUntil).toBe(T0 + (14_400 - 300 - 1) * 1000);
    }
  });

  it('is accepted up to maxClockSkewSeconds; beyond, the login is refused and nothing stored', async () => {
    suite.reset({ clockOffsetSeconds: 901 });
    const run = await world.refresher('p1', [set]).runScheduled();
    expect(run.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'CLOCK_SKEW_EXCESSIVE', usable: false });
    const state = await world.store.read(set.id, clock.now());
    expect(state?.current).toBeUndefined();
    expect(state?.failure).toMatchObject({ errorCode: 'CLOCK_SKEW_EXCESSIVE', kind: 'REJECTED' });

    suite.reset({ clockOffsetSeconds: 900 });
    ({ world, set } = await suite.advisorWorld());
    expect((await world.refresher('p1', [set]).runScheduled()).sets[0]?.action).toBe('LOGGED_IN');
  });
});

describe('thresholds from the token lifetime', () => {
  it('are the configured ones for long tokens and a share of the lifetime for short ones', () => {
    const long = credentialSet({ id: 'uat-advisor', vendorBaseUrl: 'https://vendor.example.com' });
    // 8 h: the configured hour plus this set's jitter (under 15 min); 4 h: a fifth less at most 1 %.
    expect(softThresholdSeconds(long, 8 * 3600)).toBe(softThresholdSeconds(long));
    expect(softThresholdSeconds(long, 8 * 3600)).toBeGreaterThanOrEqual(3600);
    expect(softThresholdSeconds(long, 4 * 3600)).toBeGreaterThanOrEqual(Math.floor(0.19 * 4 * 3600));
    expect(softThresholdSeconds(long, 4 * 3600)).toBeLessThanOrEqual(0.2 * 4 * 3600);
    expect(hardFloorSeconds(long, 4 * 3600)).toBe(300);
    expect(hardFloorSeconds(long, 600)).toBe(30);
    expect(softThresholdSeconds(long, 600)).toBeGreaterThan(hardFloorSeconds(long, 600));
    expect(softThresholdSeconds(long, 600)).toBeLessThanOrEqual(120);
  });

  it('let a 10-minute token be used most of its life, with one login per token', async () => {
    suite.reset({ tokenLifetimeSeconds: 600 });
    ({ world, set } = await suite.advisorWorld());
    const refresher = world.refresher('p1', [set]);
    const tokens: string[] = [];
    const loggedInAt: number[] = [];
    for (let minute = 0; minute < 60; minute++) {
      const run = await refresher.runScheduled();
      const summary = run.sets[0];
      expect(summary?.usable).toBe(true);
      if (summary?.action === 'LOGGED_IN' && summary.tokenId) {
        tokens.push(summary.tokenId);
        loggedInAt.push(clock.now());
      }
      await clock.advance(60_000);
    }
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(world.telemetry.sum(Metric.LoginSuccess, { CredentialSet: set.id })).toBe(tokens.length);
    // Every token served at least 80 % of its 600 s before the next login.
    const gaps = loggedInAt.slice(1).map((at, i) => (at - (loggedInAt[i] ?? at)) / 1000);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(480);
    expect(tokens.length).toBeLessThanOrEqual(Math.ceil(3600 / 480));
  });
});
