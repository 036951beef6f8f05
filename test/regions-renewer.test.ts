import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { userBudgetIssues } from '../shared/config/user-budgets.js';
import { RegionalRateLedger } from '../shared/ledger/index.js';
import { DIMENSION_REASON, Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { LEASE_MS, RENEW_MS } from '../shared/regions/lease.js';
import { LeaseStore } from '../shared/regions/lease-store.js';
import { LeaseRenewer } from '../shared/regions/renewer.js';
import { createLeaseRenewer } from '../shared/regions/renewer-setup.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import { offsetClock } from './support/ledger-harness.js';
import { enginesTakingTurns } from './support/property-runs.js';
import { credentialSet, startWorld, type World } from './support/refresher-harness.js';

/**
 * Issue 27's lease renewer (shared/regions/renewer.ts) on real parts: one login in the sandbox serves both
 * Regions (one token table), each Region has its own ledger table (`regional`: no share, no grants), and one
 * lease table holds both Regions' records. What the user sees: each Region's vend grants at most its share, the
 * two together at most the vendor's limit, a Region that stops renewing stops granting once its lease is over,
 * and the survivor then has the whole budget.
 */
const T0 = Date.UTC(2026, 10, 28, 12);
const MINUTE = 60_000;
const HOME = 'eu-west-1';
const PEER = 'eu-central-1';

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on dynalite,
// test:long on DynamoDB Local (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 0);

describe.each(IN_TURN)('the lease renewers of two Regions on %s', (engine) => {
  const clock = new ManualClock(T0);
  let dynamo: LocalDynamo;
  let uat: Sandbox;
  let world: World;
  let set: CredentialSetConfig;
  let tokenId: string;
  let leaseTable: string;
  const ledgers: Record<string, RegionalRateLedger> = {};
  const ledgerTables: Record<string, string> = {};

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    uat = await startSandbox({ environment: 'uat', clock, quiet: true, tokenLifetimeSeconds: 4 * 3600 });
  });
  afterAll(async () => {
    await uat.close();
    await dynamo.close();
  });
  beforeEach(async () => {
    clock.set(T0);
    world = await startWorld(clock, dynamo);
    set = credentialSet({
      id: 'uat-advisor',
      vendorBaseUrl: uat.url,
      rateLimits: { general: [{ limit: 50, windowSeconds: 60 }], marginSeconds: 3 },
    });
    world.storeCredentialsOf(set, 'uat-advisor', uat);
    const summary = await world.refresher('home-refresher', [set]).runScheduled();
    tokenId = summary.sets[0]?.tokenId as string;
    leaseTable = await dynamo.createTable('leases');
    for (const region of [HOME, PEER]) {
      const table = await dynamo.createTable(`ledger-${region}`);
      ledgerTables[region] = table;
      ledgers[region] = new RegionalRateLedger({
        client: dynamo.client,
        tableName: table,
        clock,
        telemetry: new MemoryTelemetry(),
        regional: true,
      });
    }
  });

  const renewer = (region: string, client = dynamo.client, telemetry = new MemoryTelemetry()) =>
    new LeaseRenewer({
      region,
      sets: [set],
      tokens: world.store,
      ledger: ledgers[region] as RegionalRateLedger,
      leases: new LeaseStore({ client, tableName: leaseTable }),
      clock,
      telemetry,
    });
  /** Asks one permit at a time until denied: how many the Region's vend would grant now (to `consumer`). */
  const grantable = async (region: string, most = 60, consumer?: string): Promise<number> => {
    let granted = 0;
    for (; granted < most; granted++) {
      const decision = await (ledgers[region] as RegionalRateLedger).acquire({
        tokenId,
        count: 1,
        limits: set.rateLimits,
        setId: set.id,
        ...(consumer ? { consumer } : {}),
      });
      if (!decision.granted) break;
    }
    return granted;
  };

  it('grants nothing in a Region before its first lease, and one login serves both Regions', async () => {
    expect(await grantable(HOME)).toBe(0);
    expect(await grantable(PEER)).toBe(0);
    expect(uat.stats().logins['uat-advisor']).toMatchObject({ successes: 1 });
  });

  it('splits the budget: each Region at most its share, both together at most the limit', async () => {
    const home = renewer(HOME);
    const peer = renewer(PEER);
    for (let round = 0; round < 3; round++) {
      expect((await home.renewAll()).map((r) => r.outcome)).toEqual(['renewed']);
      expect((await peer.renewAll()).map((r) => r.outcome)).toEqual(['renewed']);
      clock.advance(10_000);
    }
    const fromHome = await grantable(HOME);
    const fromPeer = await grantable(PEER);
    expect(fromHome).toBeGreaterThan(0);
    expect(fromPeer).toBeGreaterThan(0);
    expect(fromHome + fromPeer).toBeLessThanOrEqual(50);
    // Demand only in home: as the renewals go on, home's share grows into what peer leaves unused.
    for (let round = 0; round < 12; round++) {
      clock.advance(10_000);
      await home.renewAll();
      await peer.renewAll();
      await grantable(HOME);
    }
    clock.advance(MINUTE + 3000);
    await home.renewAll();
    await peer.renewAll();
    const later = await grantable(HOME);
    const laterPeer = await grantable(PEER);
    expect(later).toBeGreaterThan(fromHome);
    expect(later + laterPeer).toBeLessThanOrEqual(50);
  });

  it('fences a Region that stops renewing, and gives the survivor the whole minute once its grants left', async () => {
    const home = renewer(HOME);
    const peer = renewer(PEER);
    // Both serve: the first to lease takes what is free, the other's denied asks are its demand, and the
    // renewals split the free part between them.
    let peerGrants = 0;
    for (let round = 0; round < 4; round++) {
      await home.renewAll();
      await peer.renewAll();
      await grantable(HOME, 3);
      peerGrants += await grantable(PEER, 3);
      clock.advance(10_000);
    }
    expect(peerGrants).toBeGreaterThan(0);
    // Peer is lost: it renews no more. Until its lease ends its share holds; after, it grants nothing.
    clock.advance(LEASE_MS);
    expect(await grantable(PEER)).toBe(0);
    // Home renews on; once peer's grants are out of the minute (and its tail bound), and its own too, home has
    // all 50: with peer gone, what is free is home's whether or not it asked meanwhile.
    for (let t = 0; t < 3 * MINUTE; t += 10_000) {
      clock.advance(10_000);
      await home.renewAll();
    }
    expect(await grantable(HOME, 60)).toBe(50);
    expect(await grantable(PEER)).toBe(0);
  });

  it('holds a reservation in the Region it is homed in, and serves that consumer from the shared part in the other', async () => {
    set = credentialSet({
      id: 'uat-advisor',
      vendorBaseUrl: uat.url,
      rateLimits: {
        general: [{ limit: 50, windowSeconds: 60 }],
        marginSeconds: 3,
        reservations: [{ consumer: 'order-service', perWindow: { '60': 10 }, region: HOME }],
      },
    });
    const home = renewer(HOME);
    const peer = renewer(PEER);
    for (let round = 0; round < 4; round++) {
      await home.renewAll();
      await peer.renewAll();
      await grantable(HOME, 3);
      await grantable(PEER, 3);
      clock.advance(10_000);
    }
    // Everyone else takes all they can in both Regions: the shared parts are used up.
    await grantable(HOME);
    await grantable(PEER);
    // order-service still has its reservation in its home Region, and nothing more in the other.
    expect(await grantable(HOME, 60, 'order-service')).toBe(10);
    expect(await grantable(PEER, 60, 'order-service')).toBe(0);
  });

  it("leases a vendor user's budget once, however many sets count in it", async () => {
    // Two sets logging in as one vendor user share one ledger item (quotaScope user): one lease item for it.
    const shared = (id: string) =>
      credentialSet({
        id,
        vendorBaseUrl: uat.url,
        secretId: 'token-broker/uat-shared-user',
        quotaScope: 'user',
        rateLimits: set.rateLimits,
      });
    const [a, b] = [shared('uat-a'), shared('uat-b')];
    expect(userBudgetIssues([b, a])).toEqual([]);
    world.storeCredentialsOf(a, 'uat-advisor', uat);
    await world.refresher('home-refresher', [a, b]).runScheduled();
    const renewer = new LeaseRenewer({
      region: HOME,
      sets: [b, a],
      tokens: world.store,
      ledger: ledgers[HOME] as RegionalRateLedger,
      leases: new LeaseStore({ client: dynamo.client, tableName: leaseTable }),
      clock,
      telemetry: new MemoryTelemetry(),
    });
    const renewals = await renewer.renewAll();
    expect(renewals.map((r) => [r.setId, r.ledgerKey, r.outcome])).toEqual([
      ['uat-a', 'set-uat-a', 'renewed'],
    ]);
  });

  it('plans again on the item it found when the other Region writes first, and writes once more', async () => {
    const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    try {
      const home = renewer(HOME, faulty.client);
      const peer = renewer(PEER);
      // Peer renews between home's read of the lease item and home's first write of it.
      let writes = 0;
      faulty.client.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName === 'UpdateItemCommand' && writes++ === 0)
            expect((await peer.renewAll()).map((r) => r.outcome)).toEqual(['renewed']);
          return next(args);
        },
        { step: 'initialize', name: 'peerWritesFirst' },
      );
      expect((await home.renewAll()).map((r) => r.outcome)).toEqual(['renewed']);
      expect(writes).toBe(2);
      const item = await new LeaseStore({ client: dynamo.client, tableName: leaseTable }).read(
        set.id,
        tokenId,
      );
      expect(item.version).toBe(2);
      // Peer, alone when it planned, took the whole minute; home's second plan saw it and left it.
      const minute = Object.keys(item.records[PEER]?.shares ?? {})[0] as string;
      expect(item.records[PEER]?.shares[minute]).toBe(50);
      expect(item.records[HOME]?.shares[minute]).toBe(0);
    } finally {
      faulty.client.destroy();
    }
  });

  it('adopts nothing new when its lease write fails, counts the failure, and renews on the next round', async () => {
    const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed: 27 });
    const telemetry = new MemoryTelemetry();
    try {
      const home = renewer(HOME, faulty.client, telemetry);
      faulty.faults.aim(
        ({ command }) => command === 'UpdateItem',
        'serverError',
        'serverError',
        'serverError',
      );
      const failed = await home.renewAll();
      expect(failed.map((r) => r.outcome)).toEqual(['failed']);
      expect(telemetry.sum(Metric.LeaseRenewalFailed)).toBe(1);
      expect(await grantable(HOME)).toBe(0);
      const renewed = await home.renewAll();
      expect(renewed.map((r) => r.outcome)).toEqual(['renewed']);
      expect(await grantable(HOME)).toBeGreaterThan(0);
    } finally {
      faulty.client.destroy();
    }
  });

  it('refuses to renew while its ledger time is not known well enough: renews nothing, adopts nothing, counts why', async () => {
    const deployed = (offsetMs: number, telemetry: MemoryTelemetry) => {
      // As functions/lease-renewer.ts builds it, its container's clock `offsetMs` off; DynamoDB's Date the true one.
      const { client } = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, date: clock });
      const home = createLeaseRenewer({
        client,
        local: offsetClock(clock, offsetMs),
        region: HOME,
        sets: [set],
        tables: { ledger: ledgerTables[HOME] as string, tokens: world.table, leases: leaseTable },
        telemetry,
      });
      return { home, client };
    };
    const leases = new LeaseStore({ client: dynamo.client, tableName: leaseTable });
    const telemetry = new MemoryTelemetry();
    const cold = deployed(0, telemetry);
    const tooFar = deployed(11 * MINUTE, telemetry);
    try {
      // A cold start: DynamoDB's answers all at one point of its second say its clock only to the second.
      const first = await cold.home.pollAll();
      expect(first.map((r) => [r.outcome, r.reason])).toEqual([['refused', 'uncertain']]);
      expect(telemetry.sum(Metric.LeaseRenewalRefused, { [DIMENSION_REASON]: 'uncertain' })).toBe(1);
      expect((await leases.read(set.id, tokenId)).records).toEqual({});
      expect((await ledgers[HOME]?.regionView(tokenId, set.rateLimits, set.id))?.share).toBeUndefined();
      // It looks again CLOCK_PROBE_MS later, each time at another point of the second, until it knows: then renews.
      let outcome: string | undefined;
      for (let probe = 0; probe < 20 && outcome !== 'renewed'; probe++) {
        const [renewal] = await cold.home.pollAll();
        outcome = renewal?.outcome;
        await clock.advance(Math.max(1, (renewal?.nextAt ?? 0) - clock.now()));
      }
      expect(outcome).toBe('renewed');
      // A container 11 minutes off: refused for good (the ledger's limit is 10), retried at the regular pace.
      const far = await tooFar.home.pollAll();
      expect(far.map((r) => [r.outcome, r.reason])).toEqual([['refused', 'skew']]);
      expect((far[0]?.nextAt ?? 0) - (clock.now() + 11 * MINUTE)).toBe(RENEW_MS);
      expect(telemetry.sum(Metric.LeaseRenewalRefused, { [DIMENSION_REASON]: 'skew' })).toBe(1);
    } finally {
      cold.client.destroy();
      tooFar.client.destroy();
    }
  });

  it('renews early where its polls find the other Region waiting for its share: a burst in peer is served within seconds', async () => {
    const home = renewer(HOME);
    const peer = renewer(PEER);
    // Quiet: both lease, home's services ask a little, peer's nothing.
    for (let round = 0; round < 3; round++) {
      await home.renewAll();
      await peer.renewAll();
      await grantable(HOME, 2);
      await clock.advance(10_000);
    }
    await home.pollAll();
    await peer.pollAll();
    const before = await grantable(PEER);
    // Peer's services burst: their asks are denied; its polls, then home's, then its own, every 2 s, move home's
    // idle share to it before the regular renewal 10 s on.
    const outcomes: string[] = [];
    let served = before;
    for (let poll = 0; poll < 4; poll++) {
      await clock.advance(2_000);
      for (const [name, r] of [
        ['peer', peer],
        ['home', home],
      ] as const)
        outcomes.push(...(await r.pollAll()).map((k) => `${name}:${k.outcome}`));
      served += await grantable(PEER, 60);
    }
    expect(outcomes).toContain('home:renewed');
    expect(outcomes).toContain('peer:renewed');
    expect(served).toBeGreaterThanOrEqual(40);
    expect(served + (await grantable(HOME))).toBeLessThanOrEqual(50);
  });
});
