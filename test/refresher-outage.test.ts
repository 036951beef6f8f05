import { beforeEach, describe, expect, it } from 'vitest';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { health, type Refresher, softThresholdSeconds, validitySeconds } from '../shared/tokens/index.js';
import { refresherSuite, VENDOR_CLIENT_ATTEMPTS, type World } from './support/refresher-harness.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LIFETIME = 4 * 3600;
const PERIOD = 300;
const INVOCATIONS = 5;

const suite = refresherSuite(T0, { tokenLifetimeSeconds: LIFETIME });
const { clock } = suite;
let world: World;
let set: CredentialSetConfig;
let invocations: Refresher[];

beforeEach(async () => {
  suite.reset({ outage: false });
  ({ world, set } = await suite.advisorWorld());
  invocations = Array.from({ length: INVOCATIONS }, (_, i) => world.refresher(`container-${i}`, [set]));
});

/** One scheduled tick: every invocation runs at once; returns what the first one reported. */
async function tick() {
  const summaries = await Promise.all(invocations.map((r) => r.runScheduled()));
  return summaries.map((s) => s.sets[0]);
}

/** Runs ticks from T0 until the set is due (its first tick at or past the soft threshold); returns that tick. */
async function runUntilDue(): Promise<number> {
  await tick();
  const dueTick = Math.ceil((LIFETIME - softThresholdSeconds(set, LIFETIME)) / PERIOD);
  clock.set(T0 + dueTick * PERIOD * 1000);
  return dueTick;
}

const successes = () => suite.uat.stats().logins['uat-advisor']?.successes ?? 0;

describe('a vendor outage', () => {
  it('of 40 minutes from the soft threshold: the old token stays in use, the new one arrives on the first run after', async () => {
    await runUntilDue();
    const old = (await world.store.read(set.id, clock.now()))?.current;
    if (!old) throw new Error('expected a token');
    const outageEnds = clock.now() + 40 * 60_000;
    suite.uat.update({ outage: true });
    let runsDuringOutage = 0;
    while (clock.now() < outageEnds) {
      const reports = await tick();
      runsDuringOutage++;
      expect(reports.every((r) => r?.usable && r.tokenId === old.tokenId)).toBe(true);
      expect(reports.filter((r) => r?.action === 'FAILED')).toHaveLength(1);
      const state = await world.store.read(set.id, clock.now());
      expect(state?.current?.tokenId).toBe(old.tokenId);
      expect(health(state, clock.now(), set)).toMatchObject({
        state: 'DEGRADED',
        tokenId: old.tokenId,
        lastError: { code: 'SERVICE_UNAVAILABLE' },
      });
      // What the vend API gets meanwhile: the old token, no login.
      expect(
        await invocations[0]?.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' }),
      ).toEqual({
        status: 'CURRENT',
        tokenId: old.tokenId,
        exp: old.exp,
        loggedIn: false,
      });
      await clock.advance(PERIOD * 1000);
    }
    expect(runsDuringOutage).toBe(8);
    // One attempt per run, not per invocation (each attempt = the client's 2 tries).
    expect(
      world.telemetry.sum(Metric.LoginFailure, { CredentialSet: set.id, ErrorCode: 'SERVICE_UNAVAILABLE' }),
    ).toBe(8);
    expect(world.telemetry.sum(Metric.VendorUnavailable, { CredentialSet: set.id })).toBe(8);
    expect(suite.uat.stats().logins['uat-advisor']).toEqual({
      attempts: 1 + 8 * VENDOR_CLIENT_ATTEMPTS,
      successes: 1,
      failures: 8 * VENDOR_CLIENT_ATTEMPTS,
    });

    suite.uat.update({ outage: false });
    const after = await tick();
    expect(after.filter((r) => r?.action === 'LOGGED_IN')).toHaveLength(1);
    expect(successes()).toBe(2);
    const state = await world.store.read(set.id, clock.now());
    expect(state?.current?.tokenId).not.toBe(old.tokenId);
    expect(state?.previous?.tokenId).toBe(old.tokenId);
    expect(health(state, clock.now(), set).state).toBe('HEALTHY');
    // The old token lasted the outage: it still had its floor left when the new one arrived, on the vendor's clock
    // (ours here); the broker, which takes the vendor's clock a second ahead (its Date's whole second), saw a
    // second less.
    expect(old.exp - clock.now() / 1000).toBeGreaterThanOrEqual(set.refresh.hardFloorSeconds);
    expect(validitySeconds(old, clock.now())).toBeGreaterThanOrEqual(set.refresh.hardFloorSeconds - 1);
  });

  it('longer than the token lives: no usable token from the floor on (and it says so), then recovery by itself', async () => {
    await runUntilDue();
    const old = (await world.store.read(set.id, clock.now()))?.current;
    if (!old) throw new Error('expected a token');
    // The floor as the broker must see it: a second early, as it takes the vendor's clock a second ahead of its
    // Date (which has whole seconds).
    const floorAt = (old.exp - set.refresh.hardFloorSeconds - 1) * 1000;
    const outageEnds = old.exp * 1000 + 30 * 60_000;
    const said = () => ({
      metric: world.telemetry.sum(Metric.NoUsableToken, { CredentialSet: set.id }),
      logs: world.telemetry.logs.filter((l) => l.message === 'no usable token').length,
    });
    const before = said();
    suite.uat.update({ outage: true });
    let unusableRuns = 0;
    while (clock.now() < outageEnds) {
      const reports = await tick();
      const state = await world.store.read(set.id, clock.now());
      const pastFloor = clock.now() > floorAt;
      expect(reports.every((r) => r?.usable === !pastFloor)).toBe(true);
      expect(state?.current?.usable ?? false).toBe(!pastFloor);
      if (pastFloor) {
        unusableRuns++;
        expect(health(state, clock.now(), set).state).toBe('NO_USABLE_TOKEN');
        const outcome = await invocations[0]?.refreshOne({
          credentialSetId: set.id,
          reason: 'NO_USABLE_TOKEN',
        });
        expect(outcome).toMatchObject({ status: 'UNAVAILABLE', errorCode: 'SERVICE_UNAVAILABLE' });
        expect(outcome?.status === 'UNAVAILABLE' && outcome.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      }
      await clock.advance(PERIOD * 1000);
    }
    expect(unusableRuns).toBeGreaterThan(0);
    // Each of those runs said so, once per invocation: a metric to alarm on, and an error log line.
    expect(said()).toEqual({
      metric: before.metric + unusableRuns * INVOCATIONS,
      logs: before.logs + unusableRuns * INVOCATIONS,
    });

    // The exact moment: usable with the floor left, not a second less.
    const { store } = world;
    expect((await store.read(set.id, floorAt))?.current?.usable).toBe(true);
    expect((await store.read(set.id, floorAt + 1000))?.current?.usable).toBe(false);

    suite.uat.update({ outage: false });
    const after = await tick();
    expect(after.filter((r) => r?.action === 'LOGGED_IN')).toHaveLength(1);
    expect(after.find((r) => r?.action === 'LOGGED_IN')?.usable).toBe(true);
    expect((await store.read(set.id, clock.now()))?.current?.usable).toBe(true);
    expect(health(await store.read(set.id, clock.now()), clock.now(), set).state).toBe('HEALTHY');
    expect(successes()).toBe(2);
  });
});
