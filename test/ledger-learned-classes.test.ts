import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { ConfigurationError } from '../shared/errors.js';
import { DynamoRateLedger, InvalidPermitCountError } from '../shared/ledger/index.js';
import {
  type LearnedLimit,
  learnedRingLimits,
  learnedWindowFor,
  MAX_LEARNED_LIMIT,
  PROBE_LIMIT,
  PROBE_RETRY_MS,
} from '../shared/ledger/learned-limits.js';
import { teachReport } from '../shared/ledger/learned-reports.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import { denied, granted, maxInAnySpan, seededRandom, type TimedCount } from './support/ledger-harness.js';
import { previousRelease } from './support/previous-release.js';
import { enginesTakingTurns } from './support/property-runs.js';

/** Issue 24, builds 3 and 4: learned class limits (docs/class-limits.md). */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const SET = 'uat-advisor';
const learnedSet: RateLimitSettings = rateLimitSettingsSchema.parse({ classes: { reports: [] } });
const MARGIN_MS = learnedSet.marginSeconds * 1000;
const GENERAL = learnedSet.general;
const seconds = (ms: number) => Math.floor(ms / 1000);
const RELEASE_BEFORE_LEARNING = '1bb34fe38de2e182b93747f3beee97302504ea82';

describe('learned limits: the rules (learned-limits.ts, learned-evidence.ts)', () => {
  /** A class answer's headers as one caller reports them, resetting `resetIn` seconds after `at`. */
  const report = (limit: number, resetIn: number, by: string, at = T0, remaining = 0) => ({
    limit,
    remaining,
    resetSeconds: Math.ceil((at + resetIn * 1000) / 1000),
    at,
    by,
    refused: false,
    offset: { lo: 0, hi: 0 },
  });
  const context = (maxWindows = 3) => ({ general: GENERAL, configured: [], marginMs: MARGIN_MS, maxWindows });
  const learn = (current: LearnedLimit[], r: ReturnType<typeof report>, maxWindows = 3) =>
    teachReport(current, r, context(maxWindows)).next;
  const ends = (at: number, windowSeconds: number) => at + windowSeconds * 1000 + 3 * MARGIN_MS;

  it('windows round UP to a common length; a report teaches "L per W" with W at least what is left of it (I3 a)', () => {
    expect([1, 2, 45, 60, 61, 3599, 90_000].map(learnedWindowFor)).toEqual([1, 5, 60, 60, 120, 3600, 86_400]);
    expect(learn([], report(10, 45, 'a'))).toEqual([
      { limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a', until: ends(T0, 60) },
    ]);
    // A larger limit than the most kept exactly is kept as that (lower: safe), I5.
    expect(learn([], report(5000, 5000, 'a'))?.[0]?.limit).toBe(MAX_LEARNED_LIMIT);
  });

  it('at or above a general limit of as long a window it adds nothing (I1)', () => {
    expect(learn([], report(50, 45, 'a'))).toBeUndefined();
    expect(learn([], report(60, 30, 'a'))).toBeUndefined();
    // Below the hour's 1000 but over a window longer than it: it binds.
    expect(learn([], report(1200, 5000, 'a'))).toHaveLength(1);
  });

  it("tighten only: a larger limit or a shorter window adds nothing; a longer one is one caller's word (T1, T5)", () => {
    const kept: LearnedLimit[] = [{ limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a' }];
    expect(learn(kept, report(20, 45, 'b'))).toBeUndefined();
    expect(learn(kept, report(10, 20, 'b'))).toBeUndefined();
    expect(learn(kept, report(10, 100, 'b'))).toEqual([
      kept[0],
      { limit: 10, windowSeconds: 120, learnedAt: T0, by: 'b', until: ends(T0, 120) },
    ]);
  });

  it("one caller's tightening is provisional beside what is kept; a different caller's same limit keeps it (T1-T4)", () => {
    const kept: LearnedLimit[] = [{ limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a' }];
    const lied = learn(kept, report(2, 50, 'liar')) as LearnedLimit[];
    expect(lied).toEqual([
      kept[0],
      { limit: 2, windowSeconds: 60, learnedAt: T0, by: 'liar', until: ends(T0, 60) },
    ]);
    // Ended: the class is held to what was kept before. In force: one ring of the window, at the smaller limit (M1).
    expect(learnedRingLimits(lied, GENERAL, ends(T0, 60))).toEqual([{ limit: 10, windowSeconds: 60 }]);
    expect(learnedRingLimits(lied, GENERAL, ends(T0, 60) - 1)).toEqual([{ limit: 2, windowSeconds: 60 }]);
    // The same caller again: still provisional, renewed only when that moves its end by half a window (fewer writes).
    // Another caller naming the same limit over as long a window: kept.
    expect(learn(lied, report(2, 50, 'liar', T0 + 1000))).toBeUndefined();
    expect(learn(lied, report(2, 50, 'liar', T0 + 31_000))?.[1]?.until).toBe(ends(T0 + 31_000, 60));
    // ... and then the kept 10 per 60 s adds nothing beside it.
    expect(learn(lied, report(2, 50, 'honest', T0 + 1000))).toEqual([
      { limit: 2, windowSeconds: 60, learnedAt: T0, by: 'liar' },
    ]);
    // Nothing learned: the probe.
    expect(learnedRingLimits([], GENERAL, T0)).toEqual([PROBE_LIMIT]);
  });

  it('up to three windows where the item has room; one more joins the nearest longer window, provisional (M2)', () => {
    const two: LearnedLimit[] = [
      { limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a' },
      { limit: 60, windowSeconds: 3600, learnedAt: T0, by: 'a' },
    ];
    const three = learn(two, report(25, 600, 'b', T0, 24)) as LearnedLimit[];
    expect(three.map((l) => [l.limit, l.windowSeconds, l.until])).toEqual([
      [10, 60, undefined],
      [60, 3600, undefined],
      [25, 600, ends(T0, 600)],
    ]);
    // Two windows only (an item without room for three): the 600 s limit joins the hour as 25 per hour, one
    // caller's word; the kept hour's limit stays as it was.
    const merged = learn(two, report(25, 600, 'b', T0, 24), 2) as LearnedLimit[];
    expect(merged.map((l) => [l.limit, l.windowSeconds, l.until])).toEqual([
      [10, 60, undefined],
      [60, 3600, undefined],
      [25, 3600, ends(T0, 3600)],
    ]);
    expect(learnedRingLimits(merged, GENERAL, T0)).toEqual([
      { limit: 10, windowSeconds: 60 },
      { limit: 25, windowSeconds: 3600 },
    ]);
  });
});

describe('learned limits: configuration (planFor)', () => {
  const parse = (rateLimits: unknown) => rateLimitSettingsSchema.parse(rateLimits);

  it('accepts [] for a class, held to the probe, in item format 2 sized for what it may learn', () => {
    const plan = planFor(learnedSet);
    expect(plan.itemFormat).toBe(2);
    expect([...plan.learned]).toEqual(['reports']);
    expect(plan.classes.get('reports')?.map((s) => [s.limit, s.windowSeconds])).toEqual([[1, 10]]);
    expect(plan.itemBytesBound).toBeLessThanOrEqual(1024);
    // The learned rings replace the probe; the size bound stays that of the worst case.
    const learned = planFor(learnedSet, { reports: [{ limit: 10, windowSeconds: 60 }] });
    expect(learned.classes.get('reports')?.map((s) => [s.limit, s.windowSeconds])).toEqual([[10, 60]]);
    expect(learned.itemBytesBound).toBe(plan.itemBytesBound);
    expect(planFor(learnedSet, { reports: [{ limit: 10, windowSeconds: 60 }] })).toBe(learned);
  });

  it('refuses itemFormat 1 with a learned class, saying why', () => {
    expect(() => parse({ classes: { reports: [] }, itemFormat: 1 })).toThrow(
      /itemFormat 1 cannot hold a learned class \(classes\.reports = \[\]\)/,
    );
    expect(() => planFor({ ...learnedSet, itemFormat: 1 })).toThrow(ConfigurationError);
  });

  it('three windows per learned class where the item has room at its worst, else two (M2, measured)', () => {
    const sized = (classes: Record<string, []>) => planFor(parse({ classes }));
    expect(
      [sized({ reports: [] }), sized({ reports: [], rebalancing: [] })].map((p) => [
        p.learnedWindows,
        p.itemBytesBound,
      ]),
    ).toEqual([
      [3, 804],
      [3, 993],
    ]);
    // A third learned class leaves no room for a third window each: two, as before (1012 bytes).
    expect([sized({ a: [], b: [], c: [] })].map((p) => [p.learnedWindows, p.itemBytesBound])).toEqual([
      [2, 1012],
    ]);
  });

  it('three learned classes fit one write unit at the default limits; a fourth does not', () => {
    expect(planFor(parse({ classes: { a: [], b: [], c: [] } })).itemBytesBound).toBeLessThanOrEqual(1024);
    expect(() => parse({ classes: { a: [], b: [], c: [], d: [] } })).toThrow(/over one write unit/);
  });
});

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on dynalite,
// test:long on DynamoDB Local (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 0);

describe.each(IN_TURN)('learned class limits through DynamoRateLedger on %s', (engine) => {
  const TOKEN = '5c4b3a2918070605';
  const NEXT_TOKEN = '0a1b2c3d4e5f6071';
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let table: string;
  let clock: ManualClock;
  const ledger = (options: { learnedCacheMs?: number; client?: DynamoDBClient } = {}) =>
    new DynamoRateLedger({ client, tableName: table, clock, random: () => 0, ...options });
  const ask = (l: DynamoRateLedger, count = 1, tokenId = TOKEN) =>
    l.acquire({ tokenId, caller: 'x', count, class: 'reports', limits: learnedSet, setId: SET });
  /** A class answer's headers, reported by `caller`: limit L, remaining r, resetting in `resetIn` seconds. */
  const teachBy = (l: DynamoRateLedger, caller: string, limit: number, remaining: number, resetIn: number) =>
    l.reportVendorFeedback({
      tokenId: TOKEN,
      caller,
      limits: learnedSet,
      setId: SET,
      class: 'reports',
      limit,
      remaining,
      reset: seconds(clock.now()) + resetIn,
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
    table = await dynamo.createTable('ledger-learned');
    clock = new ManualClock(T0);
  });

  it('the probe holds the class to one grant per span across processes, until something is learned', async () => {
    const [a, b] = [ledger(), ledger()];
    await expect(ask(a, 2)).rejects.toThrow(InvalidPermitCountError);
    granted(await ask(a));
    const held = denied(await ask(b));
    // The probe's ring is free again a span (10 s and the margin) after the grant, but the answer to the granted
    // request teaches the class within a round trip: the denial says to ask again within a second (and the
    // ledger's spread of retries), not after the probe's whole span.
    expect(held.reason).toBe('QUOTA');
    expect(held.retryAfterMs).toBeLessThanOrEqual(PROBE_RETRY_MS + 1000);
    // General permits are not held by the class's probe.
    granted(await b.acquire({ tokenId: TOKEN, count: 5, limits: learnedSet, setId: SET }));
    // Nothing was taught: each ask within the probe's span is denied again, each time told to ask within a second.
    for (let waited = 0; waited < 10_000; waited += held.retryAfterMs) {
      await clock.advance(held.retryAfterMs);
      expect(denied(await ask(b)).retryAfterMs).toBeLessThanOrEqual(PROBE_RETRY_MS + 1000);
    }
    await clock.advance(MARGIN_MS + Math.ceil(10_000 / 12));
    granted(await ask(b));
  });

  it('a report teaches L per W; its remaining holds the current window; a new token and a new process keep it', async () => {
    const a = ledger();
    granted(await ask(a));
    await clock.advance(500);
    const taught = await teachBy(a, 'consumer-a', 4, 3, 45);
    expect(taught?.learned).toMatchObject({
      class: 'reports',
      changed: true,
      limits: [
        {
          limit: 4,
          windowSeconds: 60,
          by: expect.any(String),
          until: clock.now() + 60_000 + 3 * MARGIN_MS,
        },
      ],
    });
    // Corroborated by a second caller: kept.
    await teachBy(a, 'consumer-b', 4, 3, 45);
    expect(await a.learned(SET)).toEqual({
      reports: [{ limit: 4, windowSeconds: 60, learnedAt: clock.now(), by: expect.any(String) }],
    });
    // 3 more in this window (the vendor's remaining), whatever the new ring knows.
    granted(await ask(a, 3));
    denied(await ask(a));
    // A restart (a new ledger instance) and the set's next token: the learned 4 per 60 s, not the probe.
    const restarted = ledger();
    await clock.advance(60_000);
    const grant = granted(await ask(restarted, 4, NEXT_TOKEN));
    expect(grant.remaining).toContainEqual({ limit: 4, windowSeconds: 60, remaining: 0, class: 'reports' });
    expect(denied(await ask(restarted, 1, NEXT_TOKEN))).toMatchObject({ reason: 'QUOTA' });
    // Stored per set, in an item of its own; the token's item says which view its grants were decided on.
    const { Item } = await client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: `learned#${SET}` } }, ConsistentRead: true }),
    );
    expect(Item?.v?.N).toBe('2');
    const token = await client.send(
      new GetItemCommand({
        TableName: table,
        Key: { pk: { S: `token#${NEXT_TOKEN}` } },
        ConsistentRead: true,
      }),
    );
    expect(token.Item?.lv?.N).toBe('2');
  });

  it('tighten only: a looser report changes nothing; one caller tightening holds at most its window, two keep it', async () => {
    const a = ledger();
    // Each report answers a request of the class a permit let through (I2).
    granted(await ask(a));
    await teachBy(a, 'consumer-a', 6, 5, 50);
    await teachBy(a, 'consumer-b', 6, 5, 50);
    expect((await teachBy(a, 'consumer-b', 12, 11, 50))?.learned?.changed).toBe(false);
    expect((await teachBy(a, 'consumer-b', 6, 5, 20))?.learned?.changed).toBe(false);
    // A liar: 1 per half minute, resetting in 30 s. It holds the class to 1 for that window and three margins
    // (rule T2)...
    await clock.advance(60_000);
    granted(await ask(a));
    await teachBy(a, 'liar', 1, 0, 30);
    expect(denied(await ask(a))).toMatchObject({ reason: 'QUOTA' });
    // ...and not after: back to the kept 6 per minute.
    await clock.advance(30_000 + 3 * MARGIN_MS);
    granted(await ask(ledger(), 5));
    expect(await a.learned(SET)).toEqual({
      reports: [{ limit: 6, windowSeconds: 60, learnedAt: T0, by: expect.any(String) }],
    });
    // The same tightening reported by a second caller is kept past its window.
    await clock.advance(120_000);
    granted(await ask(a));
    await teachBy(a, 'liar', 2, 1, 30);
    await teachBy(a, 'honest', 2, 1, 30);
    await clock.advance(3600_000);
    const kept = await a.learned(SET);
    expect(kept.reports?.map((l) => [l.limit, l.windowSeconds, l.until])).toEqual([
      [6, 60, undefined],
      [2, 30, undefined],
    ]);
    granted(await ask(a, 2));
    expect(denied(await ask(a))).toMatchObject({ reason: 'QUOTA' });
  });

  it('a rollback to release N-1 with the learned limit configured reads the item, counts what was granted, and N after it', async () => {
    // The release before this change (main when issue 24 began): it reads item format 2. (The pinned N-1 of
    // test/previous-release.json is older, reads format 1 only and fails closed on a learned set's item.)
    const previous = await previousRelease(RELEASE_BEFORE_LEARNING);
    // What N-1 accepts: the class with the limit `token-broker status` showed as learned (docs/deploying.md).
    const rollback = previous.parseLimits({
      classes: { reports: [{ limit: 4, windowSeconds: 60 }] },
      itemFormat: 2,
    });
    const a = ledger();
    granted(await ask(a));
    await teachBy(a, 'consumer-a', 4, 3, 60);
    await teachBy(a, 'consumer-b', 4, 3, 60);
    granted(await ask(a, 2));
    const old = new previous.DynamoRateLedger({ client, tableName: table, clock, random: () => 0 });
    const oldAsk = () =>
      old.acquire({ tokenId: TOKEN, caller: 'y', count: 1, class: 'reports', limits: rollback });
    await clock.advance(1000);
    // 3 granted of the 4 in the minute (the probe's, seeded, and 2): N-1 gives the last one and no more.
    expect((await oldAsk()).granted).toBe(true);
    expect((await oldAsk()).granted).toBe(false);
    // Rolled forward again: N reads N-1's writes (its `lv` kept) and counts its grant.
    expect(denied(await ask(ledger()))).toMatchObject({ reason: 'QUOTA' });
    const { Item } = await client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: `token#${TOKEN}` } }, ConsistentRead: true }),
    );
    expect(Item?.lv?.N).toBe('2');
  });

  it('two processes with different learned views, lost answers: no span above the learned limit', async () => {
    const LIMIT = 3;
    const WINDOW_MS = 60_000;
    const faultyA = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed: 7, lostAnswer: 0.5 });
    const faultyB = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed: 8, lostAnswer: 0.5 });
    // A reads the learned view once (nothing: the probe) and keeps it for an hour; B reads it every time.
    const a = ledger({ client: faultyA.client, learnedCacheMs: 3600_000 });
    const b = ledger({ client: faultyB.client, learnedCacheMs: 0 });
    const grants: TimedCount[] = [];
    const take = async (l: DynamoRateLedger) => {
      const decision = await ask(l);
      if (decision.granted) grants.push({ time: decision.grantedAt, count: decision.count });
    };
    await take(a);
    await clock.advance(400);
    // The first answer's headers, reported by two consumers: 3 per minute, 2 left, reset in 40 s.
    await teachBy(b, 'consumer-a', LIMIT, LIMIT - 1, 40);
    await teachBy(b, 'consumer-b', LIMIT, LIMIT - 1, 40);
    const random = seededRandom(24);
    for (let step = 0; step < 240; step++) {
      await clock.advance(Math.floor(random() * 2500));
      await take(random() < 0.5 ? a : b);
    }
    expect(grants.length).toBeGreaterThan(LIMIT * 3);
    expect(maxInAnySpan(grants, WINDOW_MS)).toBeLessThanOrEqual(LIMIT);
    expect(faultyA.faults.stats.lostAnswer + faultyB.faults.stats.lostAnswer).toBeGreaterThan(0);
    faultyA.client.destroy();
    faultyB.client.destroy();
  });
});
