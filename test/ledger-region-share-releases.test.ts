import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
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
    const current = new DynamoRateLedger({ client, tableName: world.table, clock, random: () => 0 });
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
    expect((await current.snapshot(TOKEN, limits)).rings[CLASS]?.slots.reduce((n, s) => n + s.count, 0)).toBe(
      3,
    );
  });
});
