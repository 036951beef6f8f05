import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { type Clock, ManualClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { DATE_LAG_MS } from '../shared/ledger/ledger-clock.js';
import { DynamoTokenStore, type StoredToken, vendorOffsetOf } from '../shared/tokens/index.js';
import { VendorClient } from '../shared/vendor-client/client.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import { offsetClock } from './support/ledger-harness.js';
import { extractPreviousRelease } from './support/previous-release.js';
import { credentialSet, instantSleeps, startWorld, type World } from './support/refresher-harness.js';

/**
 * The vendor's clock offset as the refresher stores it for the rate ledger: against DynamoDB's clock, not the
 * refresher's own. Time is simulated: one true clock, which DynamoDB's answers carry as their `Date`
 * (faulty-dynamodb's `date`), and which the sandbox runs on plus its `clockOffsetSeconds`; the refresher's clock
 * is that true clock plus its own error. So the truth the stored interval must hold is exactly the sandbox's
 * offset. In simulated time nothing moves during a request: every round trip is 0 ms, and the widths below are
 * the Date's second, its allowed lateness and what the refresher knew of DynamoDB's clock.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
/** A login at a moment inside a second, as any is. */
const LOGIN_AT = T0 + 5_437;

describe.each(ENGINES)("the refresher on %s: the vendor's clock against DynamoDB's", (engine) => {
  const truth = new ManualClock(T0);
  let dynamo: LocalDynamo;
  let uat: Sandbox;
  let faulty: FaultyDynamoDb | undefined;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    uat = await startSandbox({ environment: 'uat', clock: truth, quiet: true });
  });
  afterAll(async () => {
    await uat.close();
    await dynamo.close();
  });
  afterEach(() => {
    faulty?.client.destroy();
    faulty = undefined;
  });

  /**
   * A refresher process whose clock is `errorMs` off the true one, its DynamoDB client's answers feeding its
   * estimate of DynamoDB's clock (as functions/refresher.ts does). `warm`: the container already had answers at
   * other moments of DynamoDB's second (its earlier runs), which narrow the estimate to about 100 ms.
   */
  async function refresherProcess(options: { vendorOffsetSeconds: number; errorMs: number; warm: boolean }) {
    truth.set(T0);
    uat.update({ clockOffsetSeconds: options.vendorOffsetSeconds });
    faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, date: truth });
    const world = await startWorld(truth, dynamo, { client: faulty.client });
    const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
    const local = offsetClock(truth, options.errorMs);
    const dynamoClock = attachDateReference(faulty.client, local);
    if (options.warm) {
      for (let phase = 0; phase < 1000; phase += 100) {
        truth.set(T0 + phase);
        await world.store.read(set.id, local.now());
      }
    }
    truth.set(LOGIN_AT);
    const refresher = world.refresher('p1', [set], {
      clock: local,
      dynamoClock,
      vendorFor: () => new VendorClient({ baseUrl: uat.url, clock: instantSleeps(local) }),
    });
    return { world, set, local, dynamoClock, refresher };
  }

  /** The set's current token as the table holds it, read past the faults by a store of its own. */
  async function stored(world: World, set: CredentialSetConfig, clock: Clock): Promise<StoredToken> {
    const state = await new DynamoTokenStore({ client: dynamo.client, tableName: world.table }).read(
      set.id,
      clock.now(),
    );
    if (!state?.current) throw new Error('no current token');
    return state.current;
  }

  describe.each([
    ['1.234 s ahead of', 1234],
    ['2.345 s behind', -2345],
  ])('its clock %s DynamoDB’s', (_, errorMs) => {
    it.each([-30, 0, 120])(
      'the vendor %i s off DynamoDB: the stored interval holds it, about a second wide once warm',
      async (vendorOffsetSeconds) => {
        const { world, set, local, dynamoClock, refresher } = await refresherProcess({
          vendorOffsetSeconds,
          errorMs,
          warm: true,
        });
        const summary = await refresher.runScheduled();
        expect(summary.sets[0]?.action).toBe('LOGGED_IN');
        const token = await stored(world, set, local);
        const offset = token.vendorOffsetMs as { lo: number; hi: number };
        expect(offset.lo).toBeLessThanOrEqual(vendorOffsetSeconds * 1000);
        expect(offset.hi).toBeGreaterThanOrEqual(vendorOffsetSeconds * 1000);
        // The estimate of DynamoDB's clock: ten answers 100 ms apart leave about 100 ms, and DATE_LAG_MS.
        const dynamo = dynamoClock.offset() as { lo: number; hi: number };
        expect(dynamo.hi - dynamo.lo).toBeLessThanOrEqual(100 + DATE_LAG_MS);
        // The Date's second (the round trip is 0 here), its lateness, and that estimate: about a second.
        expect(offset.hi - offset.lo).toBe(1000 + DATE_LAG_MS + (dynamo.hi - dynamo.lo));
        // The validity decisions' skew is what it was: the vendor's clock against the refresher's own, at most.
        const vendorMinusOurs = vendorOffsetSeconds * 1000 - errorMs;
        expect(token.vendorClockSkewSeconds as number).toBeGreaterThanOrEqual(vendorMinusOurs / 1000);
        expect(token.vendorClockSkewSeconds as number).toBeLessThanOrEqual(vendorMinusOurs / 1000 + 1);
        expect(vendorOffsetOf(token)).toEqual(offset);
        expect(world.telemetry.logs.find((l) => l.message === 'login succeeded')?.attributes).toMatchObject({
          vendorOffsetMs: offset,
        });
      },
    );
  });

  it('a cold container, with only its own read and lease write: wider by the second it could not yet tell', async () => {
    const { world, set, local, dynamoClock, refresher } = await refresherProcess({
      vendorOffsetSeconds: 120,
      errorMs: 1234,
      warm: false,
    });
    await refresher.runScheduled();
    const offset = (await stored(world, set, local)).vendorOffsetMs as { lo: number; hi: number };
    expect(offset.lo).toBeLessThanOrEqual(120_000);
    expect(offset.hi).toBeGreaterThanOrEqual(120_000);
    // Both answers came in the same instant: DynamoDB's clock is known to its Date's second and lateness only.
    const dynamo = dynamoClock.offset() as { lo: number; hi: number };
    expect(dynamo.hi - dynamo.lo).toBe(1000 + DATE_LAG_MS);
    expect(offset.hi - offset.lo).toBe(2 * (1000 + DATE_LAG_MS));
  });

  it('without a DynamoDB reference (a simulated clock: the ledger runs on it), its own clock is the ledger’s', async () => {
    truth.set(LOGIN_AT);
    uat.update({ clockOffsetSeconds: -30 });
    const world = await startWorld(truth, dynamo);
    const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
    await world.refresher('p1', [set]).runScheduled();
    const offset = (await stored(world, set, truth)).vendorOffsetMs as { lo: number; hi: number };
    expect(offset.lo).toBeLessThanOrEqual(-30_000);
    expect(offset.hi).toBeGreaterThanOrEqual(-30_000);
    expect(offset.hi - offset.lo).toBe(1000 + DATE_LAG_MS);
  });

  it('release N-1 reads the token (dropping the field), and what N-1 writes back reads through the fallback', async () => {
    const { world, set, local, refresher } = await refresherProcess({
      vendorOffsetSeconds: 120,
      errorMs: 0,
      warm: true,
    });
    await refresher.runScheduled();
    const ours = await stored(world, set, local);
    expect(ours.vendorOffsetMs).toBeDefined();

    const { dir } = extractPreviousRelease();
    const load = (file: string) => import(pathToFileURL(path.join(dir, file)).href);
    const previousTokens = (await load(
      'shared/tokens/index.ts',
    )) as typeof import('../shared/tokens/index.js');
    const previousVendor = (await load(
      'shared/vendor-client/client.ts',
    )) as typeof import('../shared/vendor-client/client.js');
    const previousStore = new previousTokens.DynamoTokenStore({
      client: dynamo.client,
      tableName: world.table,
    });
    // N-1 reads the item this release wrote: the token as it was, the new field dropped by its (non-strict) schema.
    const read = await previousStore.read(set.id, local.now());
    const { vendorOffsetMs: _new, ...rest } = ours;
    expect(read?.current).toEqual({ ...rest, usable: true });
    expect(read?.current).not.toHaveProperty('vendorOffsetMs');

    // N-1 logs in again (a consumer reported the token rejected), keeping ours as previous: both as it writes them.
    await truth.advance(61_000);
    const outcome = await new previousTokens.Refresher({
      sets: [set],
      store: previousStore,
      credentials: world.secrets.source,
      vendorFor: () => new previousVendor.VendorClient({ baseUrl: uat.url, clock: instantSleeps(local) }),
      clock: local,
      telemetry: world.telemetry,
      holderId: 'n-1',
    }).refreshOne({ credentialSetId: set.id, reason: 'TOKEN_REJECTED', rejectedTokenId: ours.tokenId });
    expect(outcome).toMatchObject({ status: 'CURRENT', loggedIn: true });
    const after = await new DynamoTokenStore({ client: dynamo.client, tableName: world.table }).read(
      set.id,
      local.now(),
    );
    expect(after?.previous?.tokenId).toBe(ours.tokenId);
    // Ours keeps its skew to the ms; N-1's own is in whole seconds: vendorOffsetOf tells them apart by that.
    expect(after?.previous?.vendorClockSkewSeconds).toBe(ours.vendorClockSkewSeconds);
    expect(Number.isInteger(after?.current?.vendorClockSkewSeconds)).toBe(true);
    for (const token of [after?.current, after?.previous]) {
      expect(token).toBeDefined();
      expect(token?.vendorOffsetMs).toBeUndefined();
      // From vendorClockSkewSeconds alone: wider, and still holding the truth.
      const offset = vendorOffsetOf(token as StoredToken);
      expect(offset.lo).toBeLessThanOrEqual(120_000);
      expect(offset.hi).toBeGreaterThanOrEqual(120_000);
    }
  });
});
