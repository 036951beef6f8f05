import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { DynamoTokenStore } from '../shared/tokens/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import {
  credentialSet,
  startWorld,
  TOKEN_STORE_WRITES,
  type World,
  whileAdvancing,
} from './support/refresher-harness.js';

/**
 * Each conditional write of the token store under the fault that made the refresher mistake its own write for
 * someone else's: DynamoDB applies the write, the answer is lost, and the SDK's re-send fails its condition
 * (the lease is held, by the writer itself, or already released by it), or the SDK gives up. The refresher
 * must go on as if the answer had come.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LIFETIME = 4 * 3600;

const { lease: LEASE_WRITE, promote: PROMOTE_WRITE, failure: FAILURE_WRITE } = TOKEN_STORE_WRITES;

/** What the SDK does after the lost answer: re-send (the copy fails its condition), or give up (throttled). */
const AFTERMATHS = [
  ['the re-sent copy fails its condition', ['lostAnswer']],
  ['the SDK then gives up, throttled', ['lostAnswer', 'throttle', 'throttle']],
] as const;

describe.each(ENGINES)('the refresher on %s, when the answer of its own write is lost', (engine) => {
  const clock = new ManualClock(T0);
  let dynamo: LocalDynamo;
  let uat: Sandbox;
  let faulty: FaultyDynamoDb;
  let world: World;
  let set: CredentialSetConfig;
  /** The table as it is, read past the faults. */
  let table: DynamoTokenStore;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    uat = await startSandbox({ environment: 'uat', clock, quiet: true, tokenLifetimeSeconds: LIFETIME });
  });
  afterAll(async () => {
    await uat.close();
    await dynamo.close();
  });
  beforeEach(async () => {
    clock.set(T0);
    uat.update({ outage: false, invalidatePreviousTokenOnLogin: false });
    uat.resetStats();
    faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    world = await startWorld(clock, dynamo, { client: faulty.client });
    table = new DynamoTokenStore({ client: dynamo.client, tableName: world.table });
    set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
  });
  afterEach(() => {
    faulty.client.destroy();
  });

  const logged = (message: string) => world.telemetry.logs.filter((l) => l.message === message);
  const logins = () => uat.stats().logins['uat-advisor'];

  describe.each(AFTERMATHS)('and %s', (_, outcomes) => {
    it('on the lease write: it logs in and stores the token, and reports no contention', async () => {
      faulty.faults.aim(LEASE_WRITE, ...outcomes);
      const summary = await world.refresher('p1', [set]).runScheduled();
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(summary.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
      const state = await table.read(set.id, clock.now());
      expect(state?.current?.tokenId).toBe(summary.sets[0]?.tokenId);
      expect(state?.lease).toBeUndefined();
      expect(world.telemetry.sum(Metric.LeaseContention)).toBe(0);
      expect(logins()).toEqual({ attempts: 1, successes: 1, failures: 0 });
    });

    it('on the lease write of a re-login after the vendor rejected the token: the consumer gets a new one at once', async () => {
      const refresher = world.refresher('p1', [set]);
      const first = (await refresher.runScheduled()).sets[0]?.tokenId;
      if (!first) throw new Error('expected a first token');
      await clock.advance(5 * 60_000);
      faulty.faults.aim(LEASE_WRITE, ...outcomes);
      const outcome = await whileAdvancing(
        clock,
        refresher.refreshOne({ credentialSetId: set.id, reason: 'TOKEN_REJECTED', rejectedTokenId: first }),
      );
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(outcome).toMatchObject({ status: 'CURRENT', loggedIn: true });
      expect(outcome.status === 'CURRENT' && outcome.tokenId).not.toBe(first);
      expect((await table.read(set.id, clock.now()))?.current?.tokenId).toBe(
        outcome.status === 'CURRENT' ? outcome.tokenId : undefined,
      );
      expect(world.telemetry.sum(Metric.LeaseContention)).toBe(0);
      expect(logins()).toEqual({ attempts: 2, successes: 2, failures: 0 });
    });

    it('on the promote write: the token is not discarded, and is served', async () => {
      faulty.faults.aim(PROMOTE_WRITE, ...outcomes);
      const refresher = world.refresher('p1', [set]);
      const summary = await refresher.runScheduled();
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(summary.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
      expect(logged('lease lost before promote; token discarded')).toEqual([]);
      expect(world.telemetry.sum(Metric.LoginSuccess)).toBe(1);
      const tokenId = summary.sets[0]?.tokenId;
      expect((await table.read(set.id, clock.now()))?.current?.tokenId).toBe(tokenId);
      await expect(
        refresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' }),
      ).resolves.toEqual({ status: 'CURRENT', tokenId, exp: summary.sets[0]?.exp, loggedIn: false });
      expect(logins()).toEqual({ attempts: 1, successes: 1, failures: 0 });
    });

    it('on the failure write: the failure is recorded as its own, the lease freed, and the next run logs in', async () => {
      uat.update({ outage: true });
      faulty.faults.aim(FAILURE_WRITE, ...outcomes);
      const refresher = world.refresher('p1', [set]);
      const failed = await refresher.runScheduled();
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(failed.sets[0]).toMatchObject({ action: 'FAILED', errorCode: 'SERVICE_UNAVAILABLE' });
      expect(logged('lease lost before recording the failure')).toEqual([]);
      const state = await table.read(set.id, clock.now());
      expect(state?.failure).toMatchObject({ errorCode: 'SERVICE_UNAVAILABLE', consecutive: 1 });
      expect(state?.lease).toBeUndefined();

      uat.update({ outage: false });
      await clock.advance(5 * 60_000);
      expect((await refresher.runScheduled()).sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
      expect(world.telemetry.sum(Metric.LeaseContention)).toBe(0);
    });
  });
});
