import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { granted } from './support/ledger-harness.js';

/**
 * A write id drawn twice (issue 34): a head addition whose id is already in the item fails its condition ("my id is
 * not there yet"), reads the item, finds "its" id and, before the fix, took the write as applied: a grant answered
 * and never counted. Forced here by drawing, for the second process's first write, the id the first process's
 * write left in the item.
 */
const limits = rateLimitSettingsSchema.parse({});
const TOKEN = '0a1b2c3d4e5f6071';
const TAKEN = 'AAAAA';

/** Candidate write ids: `first`, then ids no other draw of the test makes. */
function draws(first: string, prefix: string): () => string {
  let n = 0;
  return () => (n++ === 0 ? first : `${prefix}${String(n).padStart(4, '0')}`);
}

describe.each(ENGINES)('ledger item on %s: write ids', (engine) => {
  let dynamo: LocalDynamo;
  let client: ReturnType<typeof createDynamoDbClient>;
  let clock: ManualClock;
  let table: string;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    clock = new ManualClock();
    table = await dynamo.createTable('item-write-ids');
  });

  it('I2: a write never takes an id already in the item it was planned on: a forced collision grants 50 in a second, not 51', async () => {
    const ledger = (drawWriteId: () => string) =>
      new DynamoRateLedger({ client, tableName: table, clock, random: () => 0, drawWriteId });
    const start = clock.now();
    const a = ledger(draws(TAKEN, 'a'));
    const b = ledger(draws(TAKEN, 'b'));
    // a creates the item: a full write, id TAKEN in the item's set.
    granted(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
    // b reads the item and adds to the head slot; its first draw is TAKEN.
    granted(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    // a's cache is fresh (its own write): its next grants are head additions too, on a fresh read after a conflict.
    let grants = 2;
    for (;;) {
      const decision = await a.acquire({ tokenId: TOKEN, count: 1, limits });
      if (!decision.granted) break;
      grants++;
    }
    expect(clock.now()).toBe(start);
    expect(grants).toBe(50);
    const [minute] = await a.remaining(TOKEN, limits);
    expect(minute?.remaining).toBe(0);
  });
});
