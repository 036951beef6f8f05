import {
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ReplicatedWriteConflictException,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { leaseKey } from '../shared/aws/keys.js';
import {
  InvalidLeaseRecordError,
  LeaseStore,
  LeaseStoreUnavailableError,
  type StoredLeaseRecord,
} from '../shared/regions/lease-store.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';

/**
 * The lease item of issue 27 (shared/regions/lease-store.ts): one per set and quota key, a version, one record per
 * Region; reads strongly consistent, writes conditional on the version, each Region's write touching its own
 * record only, a lost answer never applied twice, bad records refused before anything is sent.
 */
const SET = 'acme-prod';
const KEY = '0a1b2c3d4e5f6071';
const T0 = Date.UTC(2026, 10, 28, 12);

const record = (region: string, renewedAt: number, share = 25): StoredLeaseRecord => ({
  region,
  renewedAt,
  leaseUntil: renewedAt + 30_000,
  shares: { '*/1aao': share, '*/255s0': 20 * share },
  snapshot: {
    at: renewedAt,
    rings: {
      '*/1aao': {
        windowMs: 60_000,
        slotMs: 1000,
        slots: [
          { start: renewedAt - 1000, count: 3 },
          { start: renewedAt - 42_000, count: 12 },
        ],
      },
      '*/255s0': { windowMs: 3_600_000, slotMs: 60_000, slots: [{ start: renewedAt - 60_000, count: 15 }] },
    },
  },
});

/** Runs `between` once, after the first UpdateItem attempt from now on reached the engine (before any re-send). */
function afterFirstWrite(client: DynamoDBClient, between: () => Promise<void>): void {
  let attempts = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'UpdateItemCommand' && ++attempts === 2) await between();
      return next(args);
    },
    { step: 'deserialize', priority: 'high', name: `afterFirstWrite${Math.random()}` },
  );
}

describe.each(ENGINES)('lease store on %s', (engine) => {
  let dynamo: LocalDynamo;
  let faulty: FaultyDynamoDb;
  let other: FaultyDynamoDb;
  let table: string;
  let store: LeaseStore;
  /** The other Region's writer, on a client of its own. */
  let peer: LeaseStore;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    faulty?.client.destroy();
    other?.client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    faulty?.client.destroy();
    other?.client.destroy();
    faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    other = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    table = await dynamo.createTable('leases');
    store = new LeaseStore({ client: faulty.client, tableName: table });
    peer = new LeaseStore({ client: other.client, tableName: table });
  });

  it('holds each Region its record beside the other, version by version, read strongly consistent', async () => {
    expect(await store.read(SET, KEY)).toEqual({ version: 0, records: {} });
    const home = record('eu-west-1', T0);
    const first = await store.writeOwn(SET, KEY, home, 0);
    expect(first).toEqual({ ok: true, item: { version: 1, records: { 'eu-west-1': home } } });
    const away = record('eu-central-1', T0 + 3000, 20);
    expect(await peer.writeOwn(SET, KEY, away, 1)).toMatchObject({ ok: true, item: { version: 2 } });
    expect(await store.read(SET, KEY)).toEqual({
      version: 2,
      records: { 'eu-west-1': home, 'eu-central-1': away },
    });
    const reads = faulty.faults.stats.log.filter((attempt) => attempt.command === 'GetItem');
    expect(reads.length).toBeGreaterThan(0);
    // The key the contract names, and no TTL attribute.
    const { Item } = await faulty.client.send(
      new GetItemCommand({ TableName: table, Key: leaseKey(SET, KEY), ConsistentRead: true }),
    );
    expect(Item?.pk?.S).toBe(`lease#${SET}#${KEY}`);
    expect(Object.keys(Item ?? {}).sort()).toEqual(['pk', 'r:eu-central-1', 'r:eu-west-1', 'v']);
  });

  it('a write on a version someone else moved loses, changes nothing, and says what the item is now', async () => {
    await store.writeOwn(SET, KEY, record('eu-west-1', T0), 0);
    const away = record('eu-central-1', T0 + 1000);
    await peer.writeOwn(SET, KEY, away, 1);
    const late = await store.writeOwn(SET, KEY, record('eu-west-1', T0 + 10_000, 40), 1);
    expect(late).toEqual({
      ok: false,
      current: { version: 2, records: { 'eu-west-1': record('eu-west-1', T0), 'eu-central-1': away } },
    });
    // Two first writers: one creates the item, the other loses.
    const fresh = await store.writeOwn('other-set', KEY, record('eu-west-1', T0), 0);
    const second = await peer.writeOwn('other-set', KEY, record('eu-central-1', T0), 0);
    expect(fresh.ok).toBe(true);
    expect(second).toMatchObject({ ok: false, current: { version: 1 } });
  });

  it('a write whose answer is lost is applied once, and the SDK re-send changes nothing', async () => {
    await store.writeOwn(SET, KEY, record('eu-west-1', T0), 0);
    const away = record('eu-central-1', T0 + 1000);
    await peer.writeOwn(SET, KEY, away, 1);
    faulty.faults.resetStats();
    faulty.faults.set({ commands: ['UpdateItem'] });
    faulty.faults.script('lostAnswer', 'none');
    const next = record('eu-west-1', T0 + 10_000, 30);
    expect(await store.writeOwn(SET, KEY, next, 2)).toEqual({
      ok: true,
      item: { version: 3, records: { 'eu-west-1': next, 'eu-central-1': away } },
    });
    expect(faulty.faults.stats.lostAnswer).toBe(1);
    expect(faulty.faults.stats.byCommand.UpdateItem?.sent).toBe(2);
  });

  it("a lost answer and the other Region's write before the re-send: ours applied once, theirs intact", async () => {
    await store.writeOwn(SET, KEY, record('eu-west-1', T0), 0);
    const away = record('eu-central-1', T0 + 12_000, 20);
    // The re-send of our applied write (version 1 -> 2) comes after the peer's write on version 2.
    afterFirstWrite(faulty.client, async () => {
      expect((await peer.writeOwn(SET, KEY, away, 2)).ok).toBe(true);
    });
    faulty.faults.set({ commands: ['UpdateItem'] });
    faulty.faults.script('lostAnswer', 'none');
    const next = record('eu-west-1', T0 + 10_000, 30);
    const written = await store.writeOwn(SET, KEY, next, 1);
    expect(written).toEqual({
      ok: true,
      item: { version: 3, records: { 'eu-west-1': next, 'eu-central-1': away } },
    });
  });

  it('a ReplicatedWriteConflictException (a concurrent write in another Region) is a lost race: fresh read, nothing written', async () => {
    await store.writeOwn(SET, KEY, record('eu-west-1', T0), 0);
    const away = record('eu-central-1', T0 + 2000);
    // What MRSC answers when the other Region's write wins: after the SDK's own retries, above them.
    let conflicts = 0;
    faulty.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'UpdateItemCommand' && conflicts++ === 0) {
          await peer.writeOwn(SET, KEY, away, 1);
          throw new ReplicatedWriteConflictException({ message: 'conflict', $metadata: {} });
        }
        return next(args);
      },
      { step: 'initialize', name: 'replicatedWriteConflict' },
    );
    const mine = record('eu-west-1', T0 + 10_000, 40);
    expect(await store.writeOwn(SET, KEY, mine, 1)).toEqual({
      ok: false,
      current: { version: 2, records: { 'eu-west-1': record('eu-west-1', T0), 'eu-central-1': away } },
    });
    // Decided again on the fresh read, it holds.
    expect(await store.writeOwn(SET, KEY, mine, 2)).toMatchObject({ ok: true, item: { version: 3 } });
  });

  it('refuses a record that is not one, sending nothing', async () => {
    await store.writeOwn(SET, KEY, record('eu-west-1', T0), 0);
    faulty.faults.resetStats();
    const good = record('eu-west-1', T0 + 10_000);
    const bad: [string, unknown][] = [
      ['a region name', { ...good, region: 'EU West' }],
      ['a time', { ...good, renewedAt: -1 }],
      ['a lease that ends before it was renewed', { ...good, leaseUntil: good.renewedAt - 1 }],
      ['a share', { ...good, shares: { '*/1aao': 2.5 } }],
      ['a ring key', { ...good, shares: { 'not a ring': 2 } }],
      ['a field', { ...good, floor: {} }],
      [
        'a slot',
        {
          ...good,
          snapshot: {
            at: T0,
            rings: { '*/1aao': { windowMs: 60_000, slotMs: 1000, slots: [{ start: T0 + 1, count: 1 }] } },
          },
        },
      ],
      ['a snapshot', { ...good, snapshot: { rings: {} } }],
    ];
    for (const [what, wrong] of bad)
      await expect(store.writeOwn(SET, KEY, wrong as StoredLeaseRecord, 1), what).rejects.toBeInstanceOf(
        InvalidLeaseRecordError,
      );
    await expect(store.writeOwn('a set#with#hashes', KEY, good, 1)).rejects.toBeInstanceOf(
      InvalidLeaseRecordError,
    );
    await expect(store.writeOwn(SET, KEY, good, -1)).rejects.toThrow(/expectedVersion/);
    expect(faulty.faults.stats.sent).toBe(0);
    expect(await store.read(SET, KEY)).toEqual({
      version: 1,
      records: { 'eu-west-1': record('eu-west-1', T0) },
    });
  });

  it('an item holding a record that is not one is unreadable (fails closed)', async () => {
    await faulty.client.send(
      new PutItemCommand({
        TableName: table,
        Item: { ...leaseKey(SET, KEY), v: { N: '3' }, 'r:eu-west-1': { M: { renewedAt: { S: 'soon' } } } },
      }),
    );
    await expect(store.read(SET, KEY)).rejects.toBeInstanceOf(LeaseStoreUnavailableError);
    await expect(store.read(SET, KEY)).rejects.toThrow(/record of eu-west-1/);
  });
});
