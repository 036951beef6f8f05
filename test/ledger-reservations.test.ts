import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { parseBrokerConfig } from '../shared/config/broker-config.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, InvalidPermitCountError } from '../shared/ledger/index.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { consumerTag, parseReceipt } from '../shared/ledger/receipts.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { denied, fillLedgerItem, granted } from './support/ledger-harness.js';
import { enginesTakingTurns } from './support/property-runs.js';

/** 50 a minute, 1000 an hour; order-service holds 20 of the minute's 50 (30 shared). */
const limits: RateLimitSettings = rateLimitSettingsSchema.parse({
  reservations: [{ consumer: 'order-service', perWindow: { 60: 20 } }],
});
const TOKEN = '7e1d2c3b4a596877';

describe('rateLimits.reservations: validation', () => {
  const issues = (input: unknown) => {
    const result = rateLimitSettingsSchema.safeParse(input);
    return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('accepts reservations that leave at least 10 % of each window shared', () => {
    expect(
      issues({ reservations: [{ consumer: 'order-service', perWindow: { 60: 45, 3600: 900 } }] }),
    ).toEqual([]);
  });

  it.each([
    [
      'more than the limit less 10 %',
      [
        { consumer: 'a', perWindow: { 60: 30 } },
        { consumer: 'b', perWindow: { 60: 16 } },
      ],
      'reservations in the 60 s window add up to 46, over 45 (the limit 50 less the 10 % kept shared)',
    ],
    [
      'a window that is not a general one',
      [{ consumer: 'a', perWindow: { 30: 5 } }],
      'reservations[0].perWindow.30: no general limit has windowSeconds 30 (the general windows are 60, 3600)',
    ],
    [
      'a consumer twice',
      [
        { consumer: 'a', perWindow: { 60: 5 } },
        { consumer: 'a', perWindow: { 3600: 5 } },
      ],
      'reservations[1].consumer: "a" has two reservations',
    ],
    [
      'more than 10 consumers',
      Array.from({ length: 11 }, (_, i) => ({ consumer: `c${i}`, perWindow: { 60: 1 } })),
      'reservations: at most 10 consumers, not 11',
    ],
    ['an empty reservation', [{ consumer: 'a', perWindow: {} }], 'reservations[0].perWindow must reserve'],
  ])('refuses %s, naming the field', (_, reservations, message) => {
    const found = issues({ reservations });
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^reservations: rate limit settings: /);
    expect(found[0]).toContain(message);
  });

  it('refuses a reservation for a consumer that is not a consumer of the set', () => {
    const set = (id: string) => ({
      id,
      environment: 'uat',
      companyRole: 'advisor',
      vendorBaseUrl: 'https://vendor.example',
      secretId: `s-${id}`,
      rateLimits: { reservations: [{ consumer: 'order-service', perWindow: { 60: 20 } }] },
    });
    const consumer = {
      name: 'order-service',
      principalArn: 'arn:aws:iam::123456789012:role/order-service',
      credentialSets: ['uat-a'],
    };
    expect(() =>
      parseBrokerConfig({ credentialSets: [set('uat-a')], consumers: [consumer] } as never, 'stage'),
    ).not.toThrow();
    expect(() =>
      parseBrokerConfig(
        { credentialSets: [set('uat-a'), set('uat-b')], consumers: [consumer] } as never,
        'stage',
      ),
    ).toThrow(
      'stage credentialSets[1].rateLimits.reservations[0].consumer: "order-service" is not a consumer of credential set "uat-b"',
    );
  });
});

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on DynamoDB Local,
// test:long on dynalite (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 1);

describe.each(IN_TURN)('rate ledger reservations on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let table: string;
  let clock: ManualClock;
  const ledger = () => new DynamoRateLedger({ client, tableName: table, clock, random: () => 0 });
  const ask = (l: DynamoRateLedger, count: number, consumer?: string) =>
    l.acquire({
      tokenId: TOKEN,
      caller: consumer ?? 'batch',
      count,
      limits,
      ...(consumer === undefined ? {} : { consumer }),
    });

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    table = await dynamo.createTable('ledger');
    clock = new ManualClock();
  });

  it('keeps the reservation for its consumer when the others want everything', async () => {
    const l = ledger();
    granted(await ask(l, 30));
    const refused = denied(await ask(l, 1));
    expect(refused.reason).toBe('QUOTA');
    const own = granted(await ask(l, 20, 'order-service'));
    expect(parseReceipt(own.receipt)?.claims).toMatchObject({
      consumer: consumerTag('order-service'),
      split: [['*/1aao', 20]],
    });
    expect(own.receipt).toMatch(/^[A-Za-z0-9._*-]{1,256}$/);
    // Beyond its reservation it shares what is left, which the others took.
    expect(denied(await ask(l, 1, 'order-service')).reason).toBe('QUOTA');
    // A consumer without a reservation is not helped by naming a consumer that has none.
    expect(denied(await ask(l, 1, 'someone-else')).reason).toBe('QUOTA');
  });

  it("says what each consumer could have now: its reservation's room plus the shared part's, within caps and cooldowns", async () => {
    const l = ledger();
    // The general window has 45 left after this; the caller without a reservation only the shared 25 of them.
    expect(granted(await ask(l, 5)).available).toBe(25);
    expect(granted(await ask(l, 2, 'order-service')).available).toBe(18 + 25);
    expect(granted(await ask(l, 25)).available).toBe(0);
    const refused = denied(await ask(l, 1));
    expect(refused.available).toBe(0);
    expect(refused.remaining.find((w) => w.windowSeconds === 60)?.remaining).toBe(18);
    // An ask of what it was told is granted at once.
    const told = granted(await ask(l, 1, 'order-service')).available;
    expect(told).toBe(17);
    expect(granted(await ask(l, told, 'order-service')).available).toBe(0);
    // The vendor's headers cap everyone, a vendor 429 stops everyone: `available` says so.
    await clock.advance(70_000);
    const reset = Math.floor(clock.now() / 1000) + 40;
    await l.reportVendorFeedback({ tokenId: TOKEN, limits, limit: 50, remaining: 10, reset });
    expect(granted(await ask(l, 1, 'order-service')).available).toBe(9);
    await l.reportVendorFeedback({ tokenId: TOKEN, limits, retryAfterSeconds: 5 });
    expect(denied(await ask(l, 1, 'order-service')).available).toBe(0);
  });

  it('keeps the bound when reservations change on a busy set, and keeps the reservation again a span later', async () => {
    const plain = rateLimitSettingsSchema.parse({});
    const bigger = rateLimitSettingsSchema.parse({
      reservations: [{ consumer: 'order-service', perWindow: { 60: 30 } }],
    });
    const askWith = (settings: RateLimitSettings, count: number, consumer?: string) =>
      ledger().acquire({
        tokenId: TOKEN,
        caller: consumer ?? 'batch',
        count,
        limits: settings,
        ...(consumer === undefined ? {} : { consumer }),
      });
    const span = planFor(limits).general[0] as { spanMs: number; slotMs: number };
    // Without reservations, the others take the minute.
    granted(await askWith(plain, 50));
    // A reservation is added (a deploy): its rings are empty, but the minute's 50 are still in the span.
    await clock.advance(1000);
    expect(denied(await ask(ledger(), 20, 'order-service')).reason).toBe('QUOTA');
    expect(denied(await ask(ledger(), 1)).reason).toBe('QUOTA');
    // Once they have left it, the reservation is the consumer's again, whatever the others ask.
    await clock.advance(span.spanMs + span.slotMs);
    granted(await ask(ledger(), 30));
    granted(await ask(ledger(), 20, 'order-service'));
    expect(denied(await ask(ledger(), 1)).reason).toBe('QUOTA');
    // The reservation grows from 20 to 30 with the 20 and the shared 30 in the span: nobody gets more now...
    await clock.advance(1000);
    expect(denied(await askWith(bigger, 10, 'order-service')).reason).toBe('QUOTA');
    expect(denied(await askWith(bigger, 1)).reason).toBe('QUOTA');
    // ...and a span after the change, the 30 are the consumer's (the others hold the shared 20 by then).
    await clock.advance(span.spanMs + span.slotMs);
    granted(await askWith(bigger, 20));
    expect(denied(await askWith(bigger, 1)).reason).toBe('QUOTA');
    granted(await askWith(bigger, 30, 'order-service'));
  });

  it('lets the reserved consumer borrow from the shared part, and the others keep the rest', async () => {
    const l = ledger();
    const big = granted(await ask(l, 45, 'order-service'));
    expect(parseReceipt(big.receipt)?.claims.split).toEqual([['*/1aao', 20]]);
    granted(await ask(l, 5));
    expect(denied(await ask(l, 1)).reason).toBe('QUOTA');
    expect(denied(await ask(l, 1, 'order-service')).reason).toBe('QUOTA');
  });

  it('returns given-back permits to the part they came from: the shared part first', async () => {
    const l = ledger();
    const mine = granted(await ask(l, 25, 'order-service')); // 20 reserved + 5 shared
    granted(await ask(l, 25)); // the shared part is full (5 + 25 = 30)
    expect(denied(await ask(l, 1)).reason).toBe('QUOTA');
    await l.giveBack({ tokenId: TOKEN, caller: 'order-service', receipt: mine.receipt, count: 10, limits });
    // 5 back to the shared part, 5 to the reservation.
    granted(await ask(l, 5));
    expect(denied(await ask(l, 1)).reason).toBe('QUOTA');
    granted(await ask(l, 5, 'order-service'));
    expect(denied(await ask(l, 1, 'order-service')).reason).toBe('QUOTA');
  });

  it('frees the reservation as its grants leave the window, whatever the others hold', async () => {
    const l = ledger();
    granted(await ask(l, 20, 'order-service'));
    await clock.advance(10_000);
    granted(await ask(l, 30));
    const wait = denied(await ask(l, 20, 'order-service'));
    // Its own grants leave the span (window + margin, 63 s) at about 63 s: the hint says so (not the others' later grants).
    expect(wait.retryAfterMs).toBeGreaterThan(50_000);
    expect(wait.retryAfterMs).toBeLessThanOrEqual(57_000);
    await clock.advance(wait.retryAfterMs);
    granted(await ask(l, 20, 'order-service'));
    expect(denied(await ask(l, 1)).reason).toBe('QUOTA');
  });

  it('grants the reservation to a consumer racing 10 processes that take everything else at once', async () => {
    const processes = Array.from({ length: 10 }, () => ledger());
    const reserved = ledger();
    for (let round = 0; round < 4; round++) {
      const batch = processes.flatMap((p) => [ask(p, 3), ask(p, 2)]);
      const own = Promise.all([ask(reserved, 3, 'order-service'), ask(reserved, 2, 'order-service')]);
      const [others, mine] = await Promise.all([Promise.all(batch), own]);
      for (const decision of mine) granted(decision);
      expect(others.filter((d) => d.granted).reduce((sum, d) => sum + (d.granted ? d.count : 0), 0)).toBe(
        round === 0 ? 30 : 0,
      );
      await clock.advance(1000);
    }
    // 20 of the reservation granted in 4 s (5 a round), 30 shared: the minute's 50, never more.
    expect(denied(await ask(reserved, 1, 'order-service')).reason).toBe('QUOTA');
  });

  it('refuses a count no grant could ever give this consumer, and hints a finite wait beyond the shared part', async () => {
    const l = ledger();
    // The shared part is 30: more can never be granted at once to a consumer without a reservation.
    await expect(ask(l, 31)).rejects.toThrow('count must be an integer from 1 to 30 for this consumer');
    await expect(ask(l, 51, 'order-service')).rejects.toThrow(InvalidPermitCountError);
    granted(await ask(l, 10, 'order-service'));
    // 45 needs 15 of its reservation beside the whole shared part: only 10 are left until its grant ages out.
    const wait = denied(await ask(l, 45, 'order-service'));
    expect(wait.reason).toBe('QUOTA');
    expect(Number.isFinite(wait.retryAfterMs)).toBe(true);
    await clock.advance(wait.retryAfterMs);
    granted(await ask(l, 45, 'order-service'));
  });

  it('says in usage() how much of each reservation and of the shared part was granted and is left', async () => {
    const l = ledger();
    const minute = planFor(limits).general[0];
    if (!minute) throw new Error('no minute window');
    granted(await ask(l, 25, 'order-service')); // 20 of its reservation, 5 shared
    granted(await ask(l, 4)); // shared
    await clock.advance(10_000);
    granted(await ask(l, 3)); // shared
    const hour = { limit: 1000, windowSeconds: 3600, used: 32, remaining: 968 };
    expect((await l.usage(TOKEN, limits)).windows).toEqual([
      {
        limit: 50,
        windowSeconds: 60,
        used: 32,
        remaining: 18,
        shared: { limit: 30, used: 12, remaining: 18 },
        reservations: [{ consumer: 'order-service', limit: 20, used: 20, remaining: 0 }],
      },
      // No reservation in the hour: the window is as it always was.
      hour,
    ]);
    // Past the span (window plus margin) of the first grants, only the later one counts in the minute.
    await clock.advance(minute.spanMs - 10_000 + minute.slotMs);
    granted(await ask(l, 2, 'order-service'));
    expect((await l.usage(TOKEN, limits)).windows).toEqual([
      {
        limit: 50,
        windowSeconds: 60,
        used: 5,
        remaining: 45,
        shared: { limit: 30, used: 3, remaining: 27 },
        reservations: [{ consumer: 'order-service', limit: 20, used: 2, remaining: 18 }],
      },
      { ...hour, used: 34, remaining: 966 },
    ]);
    // A vendor cooldown leaves nothing to grant in any part; what was granted stays.
    await l.reportVendorFeedback({ tokenId: TOKEN, limits, retryAfterSeconds: 30 });
    const cooling = await l.usage(TOKEN, limits);
    expect(cooling.windows[0]).toMatchObject({
      remaining: 0,
      shared: { used: 3, remaining: 0 },
      reservations: [{ used: 2, remaining: 0 }],
    });
    expect(cooling.cooldownUntil).toBe(clock.now() + 30_000);
  });

  it('answers usage() of a set without reservations as before: limit, window, used and remaining only', async () => {
    const plain = rateLimitSettingsSchema.parse({});
    const l = ledger();
    granted(
      await l.acquire({ tokenId: TOKEN, caller: 'x', consumer: 'order-service', count: 2, limits: plain }),
    );
    expect(await l.usage(TOKEN, plain)).toEqual({
      windows: [
        { limit: 50, windowSeconds: 60, used: 2, remaining: 48 },
        { limit: 1000, windowSeconds: 3600, used: 2, remaining: 998 },
      ],
    });
  });

  it('leaves the item and receipts of a set without reservations as they were', async () => {
    const plain = rateLimitSettingsSchema.parse({});
    const decision = granted(
      await ledger().acquire({
        tokenId: TOKEN,
        caller: 'x',
        consumer: 'order-service',
        count: 2,
        limits: plain,
      }),
    );
    expect(decision.receipt.startsWith('r1.')).toBe(true);
    const { Item } = await client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: `token#${TOKEN}` } } }),
    );
    expect(Object.keys(Item ?? {}).filter((name) => name.includes('~') || name.includes('@'))).toEqual([]);
  });

  it('keeps the item within its computed bound with a reservation, filled as full as it gets', async () => {
    const { largest, bound } = await fillLedgerItem({ client, tableName: table, limits, hours: 1.1 });
    console.info(`ledger item with one reservation, filled: ${largest} bytes (bound ${bound})`);
    expect(largest).toBeLessThanOrEqual(bound);
    expect(bound).toBeLessThanOrEqual(4096);
  }, 180_000);
});
