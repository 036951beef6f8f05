import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { WRITE_IDS_LIMIT } from '../shared/ledger/item/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import { granted } from './support/ledger-harness.js';

/**
 * Each write of the ledger under the fault that used to break it: DynamoDB applies the write, the answer is
 * lost, the SDK re-sends it, the copy fails its condition. The ledger must take its own write for applied, not
 * for someone else's, and apply nothing twice.
 */
const limits = rateLimitSettingsSchema.parse({});
const TOKEN = '0a1b2c3d4e5f6071';

/** Runs `between` once, before the second UpdateItem attempt from now on `client` (the SDK's re-send of a write). */
function betweenAttempts(client: DynamoDBClient, between: () => Promise<void>): void {
  let attempts = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'UpdateItemCommand' && ++attempts === 2) await between();
      return next(args);
    },
    { step: 'deserialize', priority: 'high', name: `betweenAttempts${Math.random()}` },
  );
}

describe.each(ENGINES)(
  'rate ledger on %s: one effect per operation when answers are lost and the SDK retries',
  (engine) => {
    let dynamo: LocalDynamo;
    let faulty: FaultyDynamoDb;
    let clock: ManualClock;
    let table: string;
    const ledger = () =>
      new DynamoRateLedger({ client: faulty.client, tableName: table, clock, random: () => 0 });
    /** The next UpdateItem is applied and its answer lost; the SDK's re-send then meets the applied write. */
    const loseNextWriteAnswer = () => {
      faulty.faults.set({ commands: ['UpdateItem'] });
      faulty.faults.script('lostAnswer', 'none');
    };
    const minuteRemaining = async () => (await ledger().remaining(TOKEN, limits))[0]?.remaining;

    beforeAll(async () => {
      dynamo = await startEngine(engine);
    });
    afterAll(async () => {
      await dynamo.close();
    });
    beforeEach(async () => {
      faulty?.client.destroy();
      faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
      clock = new ManualClock();
      table = await dynamo.createTable('ledger-idempotence');
    });

    it('I2: a give-back whose answer is lost is applied once: grant 50, return 10, and only 10 more are granted', async () => {
      const a = ledger();
      const grant = granted(await a.acquire({ tokenId: TOKEN, count: 50, limits }));
      await clock.advance(1000);
      loseNextWriteAnswer();
      await expect(
        a.giveBack({ tokenId: TOKEN, count: 10, receipt: grant.receipt, limits }),
      ).resolves.toEqual({
        returned: 10,
      });
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(faulty.faults.stats.byCommand.UpdateItem?.sent).toBe(3);
      expect(await minuteRemaining()).toBe(10);
      const b = ledger();
      granted(await b.acquire({ tokenId: TOKEN, count: 10, limits }));
      const no = await b.acquire({ tokenId: TOKEN, count: 1, limits });
      expect(no).toMatchObject({ granted: false, reason: 'QUOTA' });
    });

    it('I2: a first grant (the item is created) whose answer is lost counts once and is answered as granted', async () => {
      loseNextWriteAnswer();
      const grant = granted(await ledger().acquire({ tokenId: TOKEN, count: 5, limits }));
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(await minuteRemaining()).toBe(45);
      // Its receipt is the one the item holds: it gives back.
      await expect(
        ledger().giveBack({ tokenId: TOKEN, count: 5, receipt: grant.receipt, limits }),
      ).resolves.toEqual({ returned: 5 });
      expect(await minuteRemaining()).toBe(50);
    });

    it('I2: a concurrent grant added to the head slot whose answer is lost is added once', async () => {
      const a = ledger();
      granted(await a.acquire({ tokenId: TOKEN, count: 3, limits }));
      await clock.advance(100);
      loseNextWriteAnswer();
      // Same slot, item known: the cheap ADD path, whose copy fails on "my write id is there already".
      const grant = granted(await a.acquire({ tokenId: TOKEN, count: 4, limits }));
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(await minuteRemaining()).toBe(43);
      await expect(a.giveBack({ tokenId: TOKEN, count: 4, receipt: grant.receipt, limits })).resolves.toEqual(
        {
          returned: 4,
        },
      );
      expect(await minuteRemaining()).toBe(47);
    });

    it('I2: in a busy second, the write past the write ids’ room carries an id too: a lost answer is told, granted and counted once', async () => {
      const a = ledger();
      granted(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
      // The first write of the second is a full one (one write id); eleven head additions fill the set.
      for (let i = 0; i < WRITE_IDS_LIMIT - 1; i++)
        granted(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
      expect(await minuteRemaining()).toBe(50 - WRITE_IDS_LIMIT);
      faulty.faults.resetStats();
      loseNextWriteAnswer();
      // The set is full: a full write (which resets it) with its own id. Its answer is lost; the SDK re-sends it,
      // the copy fails its condition, and the id in the item says it applied (was: failed closed, never sent again).
      const grant = granted(await a.acquire({ tokenId: TOKEN, count: 2, limits }));
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      expect(faulty.faults.stats.byCommand.UpdateItem?.sent).toBe(2);
      expect(await minuteRemaining()).toBe(50 - WRITE_IDS_LIMIT - 2);
      // And its give-back applies once.
      await expect(a.giveBack({ tokenId: TOKEN, count: 2, receipt: grant.receipt, limits })).resolves.toEqual(
        {
          returned: 2,
        },
      );
      expect(await minuteRemaining()).toBe(50 - WRITE_IDS_LIMIT);
    });

    it('I2: a lost answer, then another process’s full write before the re-send: the carried ids tell it, counted once, and its give-back applies once', async () => {
      const other = createDynamoDbClient({ endpoint: dynamo.endpoint });
      const b = new DynamoRateLedger({ client: other, tableName: table, clock, random: () => 0 });
      try {
        const a = ledger();
        granted(await a.acquire({ tokenId: TOKEN, count: 3, limits }));
        const mine = granted(await b.acquire({ tokenId: TOKEN, caller: 'b', count: 1, limits }));
        // A's next write applies and its answer is lost; before the SDK re-sends it, B gives back its permit: a
        // full write, which replaces the item's write ids (A's among them) with its own.
        loseNextWriteAnswer();
        betweenAttempts(faulty.client, async () => {
          await b.giveBack({ tokenId: TOKEN, caller: 'b', count: 1, receipt: mine.receipt, limits });
        });
        const grant = granted(await a.acquire({ tokenId: TOKEN, count: 4, limits }));
        expect(faulty.faults.stats.lostAnswer).toBe(1);
        // Counted once (was: decided again on fresh state and counted twice, 39 left).
        expect(await minuteRemaining()).toBe(50 - 3 - 4);
        // The same for its give-back: applied, answer lost, B's full write, re-sent: 200 (was: 409 spent).
        const again = granted(await b.acquire({ tokenId: TOKEN, caller: 'b', count: 1, limits }));
        loseNextWriteAnswer();
        betweenAttempts(faulty.client, async () => {
          await b.giveBack({ tokenId: TOKEN, caller: 'b', count: 1, receipt: again.receipt, limits });
        });
        await expect(
          a.giveBack({ tokenId: TOKEN, count: 4, receipt: grant.receipt, limits }),
        ).resolves.toEqual({
          returned: 4,
        });
        expect(await minuteRemaining()).toBe(50 - 3);
      } finally {
        other.destroy();
      }
    });

    it('I2: a reserved consumer’s grant in a busy second whose answer is lost is granted, counted once, never denied', async () => {
      const reserved = rateLimitSettingsSchema.parse({
        reservations: [{ consumer: 'order-service', perWindow: { '60': 20 } }],
      });
      const a = ledger();
      const ask = (count: number) =>
        a.acquire({ tokenId: TOKEN, consumer: 'order-service', count, limits: reserved });
      granted(await ask(1));
      // Fill the second's write ids: the next write has no room for its id in the set.
      for (let i = 0; i < WRITE_IDS_LIMIT - 1; i++) granted(await ask(1));
      loseNextWriteAnswer();
      // Within its reservation (12 of 20 used): granted, though its answer was lost (was: failed closed, 503).
      granted(await ask(2));
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      const left = await a.usage?.(TOKEN, reserved);
      const own = left?.windows[0]?.reservations?.find((r) => r.consumer === 'order-service');
      expect(own?.used).toBe(WRITE_IDS_LIMIT + 2);
    });

    it('I2: a vendor report whose answer is lost is applied once, from when it arrived', async () => {
      const a = ledger();
      granted(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
      loseNextWriteAnswer();
      await a.reportVendorFeedback({ tokenId: TOKEN, limits, retryAfterSeconds: 30 });
      expect(faulty.faults.stats.lostAnswer).toBe(1);
      const no = await ledger().acquire({ tokenId: TOKEN, count: 1, limits });
      expect(no).toMatchObject({ granted: false, reason: 'COOLDOWN', retryAfterMs: 30_000 });
      await clock.advance(30_000);
      granted(await ledger().acquire({ tokenId: TOKEN, count: 1, limits }));
    });

    it('I2: a write that never gets an answer, even after the retries, is recognised when it did apply', async () => {
      const a = ledger();
      const grant = granted(await a.acquire({ tokenId: TOKEN, count: 20, limits }));
      faulty.faults.set({ commands: ['UpdateItem'] });
      // Applied, answer lost; then the copies are throttled until the SDK gives up; the ledger reads and sees.
      faulty.faults.script('lostAnswer', 'throttle', 'throttle');
      await expect(
        a.giveBack({ tokenId: TOKEN, count: 20, receipt: grant.receipt, limits }),
      ).resolves.toEqual({
        returned: 20,
      });
      expect(await minuteRemaining()).toBe(50);
    });

    it('I2: a write that was not applied and got no answer fails closed: no permit', async () => {
      const a = ledger();
      faulty.faults.set({ commands: ['UpdateItem'] });
      faulty.faults.script('serverError', 'serverError', 'serverError');
      await expect(a.acquire({ tokenId: TOKEN, count: 5, limits })).rejects.toMatchObject({
        code: 'LEDGER_UNAVAILABLE',
      });
      faulty.faults.off();
      expect(await minuteRemaining()).toBe(50);
    });
  },
);
