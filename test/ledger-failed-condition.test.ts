import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { countDynamoCalls, granted } from './support/ledger-harness.js';

/**
 * The ledger's write conditions carry ReturnValuesOnConditionCheckFailure ALL_OLD: DynamoDB answers a lost
 * condition with the winner's item, and the ledger decides its retry on that item instead of reading it again.
 * dynalite never returns it, so there the ledger re-reads. Both paths must give the same, right answer; the
 * DynamoDB one (production's) runs only on DynamoDB Local.
 */
const limits: RateLimitSettings = rateLimitSettingsSchema.parse({});
const TOKEN = '5e6f708192a3b4c5';

describe.each(ENGINES)('rate ledger on %s: a write that lost its condition', (engine) => {
  const returnsItem = engine === 'DynamoDB Local';
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let counter: ReturnType<typeof countDynamoCalls>;
  let table: string;
  let clock: ManualClock;
  const ledger = () => new DynamoRateLedger({ client, tableName: table, clock, random: () => 0 });

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
    counter = countDynamoCalls(client);
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    table = await dynamo.createTable('ledger-condition');
    clock = new ManualClock();
  });

  it(`retries on ${returnsItem ? 'the item DynamoDB returned with the failure (no read)' : 'a fresh read (dynalite returns no item)'}, and grants what is really left`, async () => {
    const a = ledger();
    const b = ledger();
    const first = granted(await a.acquire({ tokenId: TOKEN, count: 2, limits }));
    // b rewrites the item behind a's back (a give-back is a full write): a's cached item is now stale.
    await b.giveBack({ tokenId: TOKEN, count: 1, receipt: first.receipt, limits });
    counter.reset();
    const second = granted(await a.acquire({ tokenId: TOKEN, count: 5, limits }));
    // a's first write, built on its cache, lost its condition; the second, built on the winner's item, applied.
    expect(counter.calls.UpdateItemCommand).toBe(2);
    expect(counter.calls.GetItemCommand ?? 0).toBe(returnsItem ? 0 : 1);
    // 2 granted, 1 given back, 5 granted: 6 used of the minute's 50 and of the hour's 1000.
    expect(second.remaining).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 44 },
      { limit: 1000, windowSeconds: 3600, remaining: 994 },
    ]);
    expect(await ledger().remaining(TOKEN, limits)).toEqual(second.remaining);
  });

  it(`gives back on ${returnsItem ? 'the returned item (no read)' : 'a fresh read'} when its full write lost its condition`, async () => {
    const a = ledger();
    const b = ledger();
    const first = granted(await a.acquire({ tokenId: TOKEN, count: 4, limits }));
    const second = granted(await a.acquire({ tokenId: TOKEN, count: 4, limits }));
    await b.giveBack({ tokenId: TOKEN, count: 1, receipt: first.receipt, limits });
    counter.reset();
    // a's give-back rewrites the whole item from its cache, which b's give-back made stale.
    await a.giveBack({ tokenId: TOKEN, count: 2, receipt: second.receipt, limits });
    expect(counter.calls.UpdateItemCommand).toBe(2);
    expect(counter.calls.GetItemCommand ?? 0).toBe(returnsItem ? 0 : 1);
    // 8 granted, 3 given back: 5 used. Neither give-back lost, none counted twice.
    expect(await ledger().remaining(TOKEN, limits)).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 45 },
      { limit: 1000, windowSeconds: 3600, remaining: 995 },
    ]);
  });
});
