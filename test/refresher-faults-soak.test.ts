import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { Metric } from '../shared/metric-names.js';
import { DynamoTokenStore, type RefreshOutcome, TokenStoreUnavailableError } from '../shared/tokens/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import { enginesTakingTurns } from './support/property-runs.js';
import {
  credentialSet,
  expectNoSecrets,
  sandboxPasswords,
  startWorld,
  whileAdvancing,
} from './support/refresher-harness.js';

/**
 * One refresher process over a tokens table that loses 8 % of the answers of applied writes, throttles 3 % of
 * the requests and fails 3 % with a 500, the SDK retrying as in production (3 attempts): two days of scheduled runs
 * every 5 minutes (1-hour tokens: a scheduled re-login every hour), and twice an hour a consumer reporting its
 * token rejected by the vendor (a re-login at once), the vendor down for every other of those (a failure
 * written). With one process, any contention
 * is with itself: there must be none, no token discarded, and a usable token in the table at every moment.
 */
const T0 = Date.UTC(2026, 0, 5, 0, 0, 0);
const LIFETIME = 3600;
const PERIOD = 300;
const TICKS = (48 * 3600) / PERIOD;
/** A consumer reports its token rejected this long after a scheduled run (past the storm guard's minute). */
const REJECTION_DELAY = 120;

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on dynalite,
// test:long on DynamoDB Local (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 0);

describe.each(IN_TURN)('two days of refreshes on %s with lost answers, throttles and 500s', (engine) => {
  const clock = new ManualClock(T0);
  let dynamo: LocalDynamo;
  let uat: Sandbox;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    uat = await startSandbox({ environment: 'uat', clock, quiet: true, tokenLifetimeSeconds: LIFETIME });
  });
  afterAll(async () => {
    await uat.close();
    await dynamo.close();
  });

  it('never contends with itself, never discards a token it stored, and always leaves a usable token', async () => {
    const faulty = createFaultyDynamoDbClient({
      endpoint: dynamo.endpoint,
      seed: 23,
      lostAnswer: 0.08,
      throttle: 0.03,
      serverError: 0.03,
    });
    const world = await startWorld(clock, dynamo, { client: faulty.client });
    const table = new DynamoTokenStore({ client: dynamo.client, tableName: world.table });
    const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
    const refresher = world.refresher('p1', [set]);

    const actions: Record<string, number> = {};
    const rejections = { loggedIn: 0, failed: 0 };
    /** DynamoDB failing for good (every attempt refused unapplied): an outage of the store, said as such. */
    let storeErrors = 0;
    /** Everything that went wrong, by run: the whole picture, rather than the first of it. */
    const problems: string[] = [];
    const usableNow = async (when: string) => {
      const current = (await table.read(set.id, clock.now()))?.current;
      if (!current?.usable) problems.push(`${when}: no usable token in the table`);
      return current?.tokenId;
    };

    for (let tick = 0; tick < TICKS; tick++) {
      clock.set(T0 + tick * PERIOD * 1000);
      uat.update({ outage: false });
      const run = (await refresher.runScheduled()).sets[0];
      const action = run?.action ?? 'none';
      actions[action] = (actions[action] ?? 0) + 1;
      if (action === 'ERROR' && run?.errorCode === 'TOKEN_STORE_UNAVAILABLE') storeErrors++;
      else if (action !== 'FRESH' && action !== 'LOGGED_IN') problems.push(`run ${tick}: ${action}`);
      if (tick === 0 && action !== 'LOGGED_IN') continue; // no token yet: the next run logs in
      const rejected = await usableNow(`after run ${tick}`);

      if (tick % 6 !== 2 || rejected === undefined) continue;
      clock.set(T0 + (tick * PERIOD + REJECTION_DELAY) * 1000);
      const vendorDown = tick % 12 === 8;
      uat.update({ outage: vendorDown });
      const outcome: RefreshOutcome | 'store error' = await whileAdvancing(
        clock,
        refresher.refreshOne({
          credentialSetId: set.id,
          reason: 'TOKEN_REJECTED',
          rejectedTokenId: rejected,
        }),
      ).catch((error: unknown) => {
        if (!(error instanceof TokenStoreUnavailableError)) throw error;
        return 'store error';
      });
      const when = `the rejection at run ${tick}`;
      if (outcome === 'store error') storeErrors++;
      else if (vendorDown) {
        if (outcome.status === 'UNAVAILABLE' && outcome.errorCode === 'SERVICE_UNAVAILABLE')
          rejections.failed++;
        else problems.push(`${when} (vendor down): ${JSON.stringify(outcome)}`);
      } else if (outcome.status === 'CURRENT' && outcome.loggedIn && outcome.tokenId !== rejected) {
        rejections.loggedIn++;
        const stored = await usableNow(`after ${when}`);
        if (stored !== outcome.tokenId)
          problems.push(`${when}: logged in, but the table holds another token`);
      } else problems.push(`${when}: ${JSON.stringify(outcome)}`);
      // The vendor's still-valid token stays in the table for the consumers until a re-login replaces it.
      await usableNow(`after ${when}`);
    }

    const stats = faulty.faults.stats;
    const contention = world.telemetry.sum(Metric.LeaseContention);
    const warned = (message: string) => world.telemetry.logs.filter((l) => l.message === message).length;
    console.info(
      `${engine}: runs ${JSON.stringify(actions)}, rejections ${JSON.stringify(rejections)}, store errors ${storeErrors}, problems ${problems.length}, contention ${contention}; ` +
        `UpdateItem ${JSON.stringify(stats.byCommand.UpdateItem)}, GetItem ${JSON.stringify(stats.byCommand.GetItem)}`,
    );
    expect(problems).toEqual([]);
    expect(contention).toBe(0);
    expect(warned('lease lost before promote; token discarded')).toBe(0);
    expect(warned('lease lost before recording the failure')).toBe(0);
    // Every login the vendor answered was stored and counted, none lost to a misread write.
    const logins = uat.stats().logins['uat-advisor'];
    expect(world.telemetry.sum(Metric.LoginSuccess)).toBe(logins?.successes);
    // The faults were there, on every write the refresher makes: many cycles, each write's answer lost at times.
    expect(stats.byCommand.UpdateItem?.lostAnswer).toBeGreaterThanOrEqual(15);
    expect(actions.LOGGED_IN).toBeGreaterThanOrEqual(40);
    expect(rejections.loggedIn).toBeGreaterThanOrEqual(40);
    expect(rejections.failed).toBeGreaterThanOrEqual(40);
    expect(storeErrors).toBeLessThanOrEqual(3);
    expectNoSecrets(world.telemetry.dump(), sandboxPasswords());
    faulty.client.destroy();
  }, 120_000);
});
