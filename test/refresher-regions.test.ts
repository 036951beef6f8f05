import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { DynamoTokenStore, type Refresher } from '../shared/tokens/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { type Attempt, createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import {
  credentialSet,
  startWorld,
  TOKEN_STORE_WRITES,
  type World,
  whileAdvancing,
} from './support/refresher-harness.js';

/**
 * A two-Region stage (docs/multi-region.md): both Regions' refreshers share one token table, the MRSC table,
 * so one login per set serves both. When the two write the set's item at once, MRSC refuses one of them,
 * unapplied, with ReplicatedWriteConflictException (the SDK retries it; here it lasts past those retries, so
 * the token store sees it): the refused Region must decide again from a fresh read, as after a failed
 * condition, and serve the other Region's token: one vendor login, never an outage.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const LIFETIME = 4 * 3600;
/** The SDK's attempts of one write (createFaultyDynamoDbClient's default maxAttempts): each meets the conflict. */
const CONFLICTS = ['replicatedWriteConflict', 'replicatedWriteConflict', 'replicatedWriteConflict'] as const;

const { lease: LEASE_WRITE } = TOKEN_STORE_WRITES;

describe.each(ENGINES)('two Regions sharing the token table on %s', (engine) => {
  const clock = new ManualClock(T0);
  let dynamo: LocalDynamo;
  let uat: Sandbox;
  /** Each Region's own DynamoDB client (its own endpoint of the MRSC table, in production). */
  let home: FaultyDynamoDb;
  let peer: FaultyDynamoDb;
  let world: World;
  let set: CredentialSetConfig;
  let homeRefresher: Refresher;
  let peerRefresher: Refresher;
  let peerStore: DynamoTokenStore;

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
    uat.update({ outage: false });
    uat.resetStats();
    home = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    peer = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    world = await startWorld(clock, dynamo, { client: home.client });
    peerStore = new DynamoTokenStore({ client: peer.client, tableName: world.table });
    set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: uat.url });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
    homeRefresher = world.refresher('eu-west-1/lambda-1', [set]);
    peerRefresher = world.refresher('eu-central-1/lambda-1', [set], { store: peerStore });
  });
  afterEach(() => {
    home.client.destroy();
    peer.client.destroy();
  });

  const logins = () => uat.stats().logins['uat-advisor'];
  const conflicts = (faulty: FaultyDynamoDb) =>
    faulty.faults.stats.log.filter((attempt) => attempt.fault === 'replicatedWriteConflict').length;

  /**
   * Both Regions read the token item before either writes the lease (the home Region's lease write waits for the
   * peer's first call to answer: on a busy machine the home Region could otherwise finish before the peer reads,
   * and the peer would find the token and never race); the peer's lease write waits until the home Region's has
   * applied, then meets MRSC's conflict on every attempt: the home Region wrote first.
   */
  function homeWritesTheLeaseFirst(): void {
    let homeLeaseWritten: () => void = () => undefined;
    const written = new Promise<void>((resolve) => {
      homeLeaseWritten = resolve;
    });
    const isLeaseWrite = (context: { commandName?: string }, input: unknown) =>
      LEASE_WRITE({
        command: (context.commandName ?? '').replace(/Command$/, ''),
        input: input as Attempt['input'],
      });
    let peerHasRead: () => void = () => undefined;
    const peerRead = new Promise<void>((resolve) => {
      peerHasRead = resolve;
    });
    home.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (isLeaseWrite(context, args.input)) await peerRead;
        const result = await next(args);
        if (isLeaseWrite(context, args.input)) homeLeaseWritten();
        return result;
      },
      { step: 'initialize', name: 'homeLeaseWritten' },
    );
    peer.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (isLeaseWrite(context, args.input)) await written;
        const result = await next(args);
        peerHasRead();
        return result;
      },
      { step: 'initialize', name: 'peerAfterHome' },
    );
    peer.faults.aim(LEASE_WRITE, ...CONFLICTS);
  }

  it('on demand in both Regions at once, a conflict on the lease: one login, both serve the same token', async () => {
    homeWritesTheLeaseFirst();
    const request = { credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' } as const;
    const [atHome, atPeer] = await whileAdvancing(
      clock,
      Promise.all([homeRefresher.refreshOne(request), peerRefresher.refreshOne(request)]),
    );
    expect(conflicts(peer)).toBe(CONFLICTS.length);
    expect(atHome).toMatchObject({ status: 'CURRENT', loggedIn: true });
    expect(atPeer).toMatchObject({ status: 'CURRENT', loggedIn: false });
    const tokenId = atHome.status === 'CURRENT' ? atHome.tokenId : undefined;
    expect(atPeer.status === 'CURRENT' && atPeer.tokenId).toBe(tokenId);
    // What each Region's vend function reads, through its own client: the same token.
    expect((await world.store.read(set.id, clock.now()))?.current?.tokenId).toBe(tokenId);
    expect((await peerStore.read(set.id, clock.now()))?.current?.tokenId).toBe(tokenId);
    expect(logins()).toEqual({ attempts: 1, successes: 1, failures: 0 });
    expect(world.telemetry.sum(Metric.LeaseContention)).toBeGreaterThan(0);
  });

  it('on both schedules at once, a conflict on the lease: one login, and the peer reports contention, not an error', async () => {
    homeWritesTheLeaseFirst();
    const [atHome, atPeer] = await whileAdvancing(
      clock,
      Promise.all([homeRefresher.runScheduled(), peerRefresher.runScheduled()]),
    );
    expect(conflicts(peer)).toBe(CONFLICTS.length);
    expect(atHome.sets[0]).toMatchObject({ action: 'LOGGED_IN', usable: true });
    expect(atPeer.sets[0]?.action).toBe('CONTENDED');
    const next = await peerRefresher.refreshOne({ credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' });
    expect(next).toMatchObject({ status: 'CURRENT', loggedIn: false, tokenId: atHome.sets[0]?.tokenId });
    expect(logins()).toEqual({ attempts: 1, successes: 1, failures: 0 });
  });

  it("a conflict on the lease holder's promote or failure write is a lost lease, not an outage", async () => {
    // The peer holds the lease; its promote, then its failure write, meet the conflict (another Region's write
    // in flight): each answers "not written", as a failed condition does, and the item keeps its lease.
    const leaseId = 'peer-lease';
    const taken = await peerStore.takeLease({
      credentialSetId: set.id,
      holder: 'eu-central-1/lambda-1',
      leaseId,
      now: clock.now(),
      leaseExpiresAt: clock.now() + 30_000,
      lastAttemptNoLaterThan: clock.now(),
      expectedTokenId: null,
    });
    expect(taken.taken).toBe(true);
    peer.faults.aim(TOKEN_STORE_WRITES.promote, ...CONFLICTS);
    peer.faults.aim(TOKEN_STORE_WRITES.failure, ...CONFLICTS);
    const token = {
      tokenId: 'conflict-token',
      accessToken: 'not-a-real-token',
      exp: Math.floor(clock.now() / 1000) + LIFETIME,
      env: 'uat',
      obtainedAt: clock.now(),
      usableUntil: clock.now() + 3_600_000,
      tenant: 't',
      companyKey: 'c',
      executionPlatformKey: 'e',
      userKey: 'u',
      username: 'uat-advisor',
      roles: [],
      groups: [],
      defaultCompanyInventorySource: 'd',
    };
    await expect(
      peerStore.promote({ credentialSetId: set.id, leaseId, now: clock.now(), token }),
    ).resolves.toBe(false);
    const failure = {
      kind: 'TRANSIENT' as const,
      errorCode: 'VENDOR_UNAVAILABLE',
      consecutive: 1,
      cooldownUntil: clock.now() + 60_000,
      at: clock.now(),
    };
    await expect(
      peerStore.recordFailure({ credentialSetId: set.id, leaseId, now: clock.now(), failure }),
    ).resolves.toBe(false);
    expect(conflicts(peer)).toBe(2 * CONFLICTS.length);
    const state = await world.store.read(set.id, clock.now());
    expect(state?.lease?.leaseId).toBe(leaseId);
    expect(state?.current).toBeUndefined();
    expect(state?.failure).toBeUndefined();
  });
});
