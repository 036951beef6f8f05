import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { softThresholdSeconds, validitySeconds } from '../shared/tokens/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { propertyRuns } from './support/property-runs.js';
import { credentialSet, expectNoSecrets, sandboxPasswords, startWorld } from './support/refresher-harness.js';

const T0 = Date.UTC(2026, 0, 5, 0, 0, 0);
const LIFETIME = 4 * 3600;
const PERIOD = 300;
/**
 * Simulated hours: `npm test` runs the first 6 of test:long's 24 (the same world, so the same run up to its end:
 * two logins of each set, a token every 39 runs; test:long's eight). Every count asserted is taken from the length.
 */
const HOURS = propertyRuns({ quick: 6, full: 24 });
const TICKS = (HOURS * 3600) / PERIOD; // 72 or 288 scheduled runs
const INVOCATIONS = 20;

let dynamo: LocalDynamo;
let clock: ManualClock;
let uat: Sandbox;
let prod: Sandbox;

beforeAll(async () => {
  clock = new ManualClock(T0);
  dynamo = await startDynalite();
  uat = await startSandbox({ environment: 'uat', clock, quiet: true, tokenLifetimeSeconds: LIFETIME });
  prod = await startSandbox({ environment: 'prod', clock, quiet: true, tokenLifetimeSeconds: LIFETIME });
});
afterAll(async () => {
  await Promise.all([uat.close(), prod.close()]);
  await dynamo.close();
});

/**
 * What the settings predict: a token obtained at a run is re-logged in at the first run with no more than
 * the set's (jittered) soft threshold left, i.e. every ceil((lifetime − soft) / period) runs, starting at run 0.
 */
function expectedLogins(set: CredentialSetConfig): number {
  const runsPerToken = Math.ceil((LIFETIME - softThresholdSeconds(set, LIFETIME)) / PERIOD);
  return Math.floor((TICKS - 1) / runsPerToken) + 1;
}

describe(`${HOURS} simulated hours, a run every 5 minutes with 20 concurrent invocations`, () => {
  it('logs in exactly once per token, between the soft threshold and the floor, never leaving a token below the floor', async () => {
    const world = await startWorld(clock, dynamo);
    const sets = [
      credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url }),
      credentialSet({ id: 'uat-execution', companyRole: 'execution-platform', vendorBaseUrl: uat.url }),
      credentialSet({ id: 'prod-advisor', environment: 'prod', vendorBaseUrl: prod.url }),
    ];
    const usernames: Record<string, Sandbox> = {
      'uat-advisor': uat,
      'uat-execution': uat,
      'prod-advisor': prod,
    };
    for (const set of sets) world.storeCredentialsOf(set, set.id, usernames[set.id] as Sandbox);
    // 20 Lambda containers, each with its own holder id and vendor clients, over one table.
    const invocations = Array.from({ length: INVOCATIONS }, (_, i) =>
      world.refresher(`container-${i}`, sets),
    );

    const tokens = new Map<string, string[]>(sets.map((s) => [s.id, []]));
    const reloginValidity = new Map<string, number[]>(sets.map((s) => [s.id, []]));
    let lowestValidityBeforeRun = Number.POSITIVE_INFINITY;
    for (let tick = 0; tick < TICKS; tick++) {
      if (tick > 0) await clock.advance(PERIOD * 1000);
      const before = await Promise.all(sets.map((s) => world.store.read(s.id, clock.now())));
      if (tick > 0) {
        // The worst moment: the longest time since the last run. The stored token must still be above its floor.
        for (const [index, set] of sets.entries()) {
          const current = before[index]?.current;
          expect(current?.usable, `${set.id} at run ${tick}`).toBe(true);
          const left = validitySeconds(current, clock.now());
          expect(left).toBeGreaterThan(set.refresh.hardFloorSeconds);
          lowestValidityBeforeRun = Math.min(lowestValidityBeforeRun, left);
        }
      }
      await Promise.all(invocations.map((r) => r.runScheduled()));
      for (const [index, set] of sets.entries()) {
        const after = (await world.store.read(set.id, clock.now()))?.current;
        const seen = tokens.get(set.id) as string[];
        if (after && after.tokenId !== seen.at(-1)) {
          seen.push(after.tokenId);
          const old = before[index]?.current;
          if (old) reloginValidity.get(set.id)?.push(validitySeconds(old, clock.now()));
        }
      }
    }

    for (const set of sets) {
      const sandbox = usernames[set.id] as Sandbox;
      const expected = expectedLogins(set);
      const distinct = tokens.get(set.id) as string[];
      expect(new Set(distinct).size, set.id).toBe(expected);
      expect(world.telemetry.sum(Metric.LoginSuccess, { CredentialSet: set.id }), set.id).toBe(expected);
      expect(sandbox.stats().logins[set.id]).toEqual({
        attempts: expected,
        successes: expected,
        failures: 0,
      });
      // Each re-login replaced a token with at most the soft threshold and more than the floor left.
      for (const left of reloginValidity.get(set.id) as number[]) {
        expect(left).toBeLessThanOrEqual(softThresholdSeconds(set, LIFETIME));
        expect(left).toBeGreaterThan(softThresholdSeconds(set, LIFETIME) - PERIOD);
        expect(left).toBeGreaterThan(set.refresh.hardFloorSeconds);
      }
      expect(reloginValidity.get(set.id)).toHaveLength(expected - 1);
    }
    expect(uat.stats().loginRequests + prod.stats().loginRequests).toBe(
      sets.reduce((n, s) => n + expectedLogins(s), 0),
    );
    expect(world.telemetry.sum(Metric.LoginFailure)).toBe(0);
    expect(lowestValidityBeforeRun).toBeGreaterThan(
      Math.min(...sets.map((s) => softThresholdSeconds(s, LIFETIME))) - PERIOD,
    );
    expectNoSecrets(world.telemetry.dump(), sandboxPasswords());
    console.info(
      `${HOURS} h soak: ${sets.map((s) => `${s.id} soft=${softThresholdSeconds(s, LIFETIME)}s logins=${expectedLogins(s)}`).join(', ')}; ` +
        `lease contention ${world.telemetry.sum(Metric.LeaseContention)}; lowest validity before a run ${lowestValidityBeforeRun}s`,
    );
  }, 120_000);
});
