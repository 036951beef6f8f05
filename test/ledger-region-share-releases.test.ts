import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { RegionalRateLedger } from '../shared/ledger/index.js';
import { GENERAL_SCOPE, ringKey } from '../shared/ledger/limit-plan.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { currentRelease, previousRelease } from './support/previous-release.js';
import { ReleaseWorld, TOKEN } from './support/release-world.js';

/**
 * Rolling forward and back with a Region's share in the ledger item (issue 27; test/ledger-releases.test.ts for
 * the releases side by side): release N-1 reads an item that carries `rs`, grants, gives back and takes vendor
 * feedback on it without failing, and leaves `rs` as it was; the current release then reads N-1's grants and
 * still holds to the share. (N-1 itself does not know shares: a rollback of a regions stage is a rollback to
 * one Region, docs/multi-region.md.)
 */
const SETTINGS = { classes: { reports: [{ limit: 10, windowSeconds: 60 }] } };
/** The last landed release (issue 33's N-1): it knows `rs`, with a strict pattern, and not `rsv`. */
const RELEASE_WITH_SHARES = 'a6dc151788fce1df21d7b674e85ed3f6c227623d';
const MINUTE = ringKey(GENERAL_SCOPE, 60_000);
const HOUR = ringKey(GENERAL_SCOPE, 3_600_000);
const CLASS = ringKey('reports', 60_000);

describe.each(ENGINES)('a Region share and release N-1 on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('N-1 reads and writes an item with a share without failing or dropping it; the current release still holds to it', async () => {
    const previous = await previousRelease();
    const clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
    const world = new ReleaseWorld(
      client,
      await dynamo.createTable('ledger-share-releases'),
      clock,
      SETTINGS,
    );
    const limits = currentRelease.parseLimits(SETTINGS);
    const current = new RegionalRateLedger({ client, tableName: world.table, clock, random: () => 0 });
    const rawItem = async () =>
      (
        await client.send(
          new GetItemCommand({
            TableName: world.table,
            Key: { pk: { S: `token#${TOKEN}` } },
            ConsistentRead: true,
          }),
        )
      ).Item;

    const share = { limits: { [MINUTE]: 20, [HOUR]: 400, [CLASS]: 5 }, fenceAt: clock.now() + 120_000 };
    await current.adoptShare(TOKEN, limits, undefined, share);
    const mine = world.side(currentRelease);
    await world.grant(mine, { count: 5, caller: 'svc-a' });
    await world.grant(mine, { count: 2, class: 'reports', caller: 'svc-a' });
    const written = (await rawItem())?.rs;
    expect(written?.S).toBeDefined();

    // N-1: head additions, a full write in a new slot, a give-back and a vendor report, all on the item.
    const old = world.side(previous);
    await world.grant(old, { count: 1, caller: 'svc-b' });
    await clock.advance(1500);
    const theirs = await world.grant(old, { count: 2, caller: 'svc-b' });
    expect(await world.giveBack(old, theirs, 1)).toBe(1);
    await old.ledger.reportVendorFeedback({
      tokenId: TOKEN,
      limits: old.limits,
      limit: 10,
      remaining: 6,
      reset: Math.floor(clock.now() / 1000) + 30,
    });
    await world.grant(old, { count: 1, class: 'reports', caller: 'svc-b' });
    await world.expectRemainingSafe(old);
    expect((await rawItem())?.rs).toEqual(written);

    // The current release counts N-1's grants (5 + 2 + 1 + 2 - 1 + 1 = 10) and grants to the share, no further.
    const usage = await current.usage(TOKEN, limits);
    expect(usage.windows[0]).toMatchObject({ limit: 20, used: 10, remaining: 10 });
    const full = await world.fill(mine, { count: 4, caller: 'svc-c' });
    expect(full.reason).toBe('QUOTA');
    expect((await current.usage(TOKEN, limits)).windows[0]).toMatchObject({ used: 20, remaining: 0 });
    // And the class: 3 of its share of 5 are used; the vendor's cap (6 left) is not the tighter.
    expect(
      (await current.regionView(TOKEN, limits)).snapshot.rings[CLASS]?.slots.reduce((n, s) => n + s.count, 0),
    ).toBe(3);
  });

  it("release a6dc151 reads an item whose share carries a version (`rsv`), grants within it and keeps the version; the current release still refuses an older record's share on it", async () => {
    const landed = await previousRelease(RELEASE_WITH_SHARES);
    const clock = new ManualClock(Date.UTC(2026, 10, 29, 12));
    const table = await dynamo.createTable('ledger-share-versions');
    const limits = currentRelease.parseLimits(SETTINGS);
    const current = new RegionalRateLedger({
      client,
      tableName: table,
      clock,
      random: () => 0,
      regional: true,
    });
    const old = new landed.DynamoRateLedger({
      client,
      tableName: table,
      clock,
      random: () => 0,
      regional: true,
    }) as unknown as RegionalRateLedger;
    const oldLimits = landed.parseLimits(SETTINGS);
    const raw = async () =>
      (
        await client.send(
          new GetItemCommand({
            TableName: table,
            Key: { pk: { S: `token#${TOKEN}` } },
            ConsistentRead: true,
          }),
        )
      ).Item;
    const share = {
      limits: { [MINUTE]: 6, [HOUR]: 400, [CLASS]: 5 },
      fenceAt: clock.now() + 30_000,
      version: 9,
    };
    await current.adoptShare(TOKEN, limits, undefined, share);
    const stamped = (await raw())?.rsv;
    expect(stamped?.S).toBe(`9;${share.fenceAt.toString(36)}`);

    // a6dc151: grants (head additions, then a full write in a new slot) within the share, and no further.
    const grantOld = () => old.acquire({ tokenId: TOKEN, count: 1, limits: oldLimits, caller: 'svc-b' });
    expect((await grantOld()).granted).toBe(true);
    await clock.advance(1500);
    let oldGranted = 1;
    while ((await grantOld()).granted) oldGranted++;
    expect(oldGranted).toBe(6);
    expect((await raw())?.rsv).toEqual(stamped);

    // The current release reads the version as its own (same fence) and refuses a slow renewal's older share.
    const slow = {
      ...share,
      limits: { ...share.limits, [MINUTE]: 40 },
      fenceAt: share.fenceAt + 5_000,
      version: 8,
    };
    expect((await current.adoptShare(TOKEN, limits, undefined, slow)).outcome).toBe('stale');
    expect((await current.acquire({ tokenId: TOKEN, count: 1, limits })).granted).toBe(false);

    // a6dc151 adopts a share of its own (a later fence): the version stamped on the old fence no longer counts, and
    // the fence decides again, as a6dc151's renewer expects.
    const later = { limits: { [MINUTE]: 10, [HOUR]: 400, [CLASS]: 5 }, fenceAt: share.fenceAt + 10_000 };
    expect((await old.adoptShare(TOKEN, oldLimits, undefined, later)).outcome).toBe('adopted');
    expect((await raw())?.rsv).toEqual(stamped);
    expect((await current.adoptShare(TOKEN, limits, undefined, slow)).outcome).toBe('stale');
    const next = { ...later, fenceAt: later.fenceAt + 10_000, version: 8 };
    expect((await current.adoptShare(TOKEN, limits, undefined, next)).outcome).toBe('adopted');
  });
});
