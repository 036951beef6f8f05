import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import type { LearnedLimit } from '../shared/ledger/learned-limits.js';
import { teachReport } from '../shared/ledger/learned-reports.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { granted } from './support/ledger-harness.js';
import { enginesTakingTurns } from './support/property-runs.js';

/**
 * Issue 24, renewing one caller's word (docs/class-limits.md, "Trust"): a class's answers tell only its most
 * constrained window at the time, so a caller that keeps reporting the class renews every provisional limit it
 * taught, not only the one its headers name; a caller that stops, or another caller, renews nothing of it.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const SET = 'uat-advisor';
const learnedSet: RateLimitSettings = rateLimitSettingsSchema.parse({ classes: { reports: [] } });
const MARGIN_MS = learnedSet.marginSeconds * 1000;
const GENERAL = learnedSet.general;
const seconds = (ms: number) => Math.floor(ms / 1000);

describe('renewal: the rules (learned-limits.ts, T3)', () => {
  /** A class answer's headers (one request counted), as one caller reports them. */
  const report = (limit: number, resetIn: number, by: string, at: number) => ({
    limit,
    remaining: limit - 1,
    resetSeconds: Math.ceil((at + resetIn * 1000) / 1000),
    at,
    by,
    refused: false,
    offset: { lo: 0, hi: 0 },
  });
  const learn = (current: LearnedLimit[], r: ReturnType<typeof report>) =>
    teachReport(current, r, { general: GENERAL, configured: [], marginMs: MARGIN_MS, maxWindows: 3 }).next;
  const ends = (at: number, windowSeconds: number) => at + windowSeconds * 1000 + 3 * MARGIN_MS;
  const two: LearnedLimit[] = [
    { limit: 10, windowSeconds: 10, learnedAt: T0, by: 'a', until: ends(T0, 10) },
    { limit: 30, windowSeconds: 60, learnedAt: T0, by: 'a', until: ends(T0, 60) },
  ];

  it('a report of the class renews every provisional limit its caller taught, when that moves its end by half a window or more', async () => {
    // 40 s later: the 10 s limit has ended, and a report of 10 per 10 s teaches it again (to last as long as the
    // caller's minute); the minute's limit is renewed to a window and three margins after the report (which moves
    // its end by 40 s: half a window or more).
    const at = T0 + 40_000;
    expect(learn(two, report(10, 7, 'a', at))).toEqual([
      { limit: 30, windowSeconds: 60, learnedAt: T0, by: 'a', until: ends(at, 60) },
      { limit: 10, windowSeconds: 10, learnedAt: at, by: 'a', until: ends(at, 60) },
    ]);
  });

  it('a reset rounded up to its whole second does not lengthen the window learned', () => {
    // A sliding 10 s window whose room comes back 9.6 s after the answer says so as the next whole second, 10.4 s.
    const [taught] =
      learn([], { ...report(10, 10.4, 'a', T0 + 600), resetSeconds: Math.ceil((T0 + 10_400) / 1000) }) ?? [];
    expect(taught?.windowSeconds).toBe(10);
  });

  it('a renewal that would move an end by less than half its window: nothing to write', () => {
    const at = T0 + 20_000;
    // A new limit of the caller lasts at least as long as its own longest (the minute's limit may hold the class,
    // and its answers, that long); the minute's, renewed by 20 s only, is not written.
    expect(learn(two.slice(1), report(10, 7, 'a', at))).toEqual([
      two[1],
      { limit: 10, windowSeconds: 10, learnedAt: at, by: 'a', until: ends(at, 60) },
    ]);
    // The same limit again, moving its end by less than half its window: no change either.
    expect(learn(two.slice(0, 1), report(10, 9, 'a', T0 + 1000))).toBeUndefined();
    expect(learn(two.slice(1), report(30, 50, 'a', T0 + 20_000))).toBeUndefined();
  });

  it("a caller's limits last at least its own longest limit's window after its report (T3)", () => {
    // Its 60 s limit may hold the class past the 10 s limit's own window and three margins: no answer comes then.
    expect(learn(two, report(10, 9, 'a', T0 + 1000))?.map((l) => [l.limit, l.until])).toEqual([
      [10, ends(T0 + 1000, 60)],
      [30, ends(T0, 60)],
    ]);
  });

  it("another caller's report renews none of them; it corroborates what it names over as long a window", () => {
    // 4 s left of the 10 s limit: its caller's report would renew it, another caller's does not.
    const at = T0 + 9000;
    expect(learn(two, report(30, 55, 'b', at))).toEqual([
      two[0],
      { limit: 30, windowSeconds: 60, learnedAt: T0, by: 'a' },
    ]);
    // A shorter window than the one taught corroborates nothing (T4: the same limit over as long a window).
    expect(learn(two, report(30, 20, 'b', at))).toBeUndefined();
  });

  it('a report of a larger limit over a window no longer than its own does not renew it (it may have risen)', () => {
    const at = T0 + 40_000;
    expect(learn(two.slice(1), report(45, 50, 'a', at))).toBeUndefined();
  });
});

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on dynalite,
// test:long on DynamoDB Local (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 0);

describe.each(IN_TURN)('renewal through DynamoRateLedger on %s', (engine) => {
  const TOKEN = '5c4b3a2918070605';
  const ONE_PRINCIPAL = 'arn:aws:iam::123456789012:role/portfolio-service';
  const OTHER = 'arn:aws:iam::123456789012:role/reporting-service';
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let table: string;
  let clock: ManualClock;
  const ledger = () => new DynamoRateLedger({ client, tableName: table, clock, random: () => 0 });
  /** The vendor's fixed windows, counted from T0: whole seconds left of the current window of this length. */
  const resetIn = (windowSeconds: number) => windowSeconds - (seconds(clock.now() - T0) % windowSeconds);
  /**
   * A class answer's headers of the window `windowSeconds` long, reported by `caller`, as a consumer reports them:
   * after a request of the class that a permit let through (the ledger weighs a report against its own history,
   * docs/class-limits.md I3).
   */
  const teachBy = async (l: DynamoRateLedger, caller: string, limit: number, windowSeconds: number) => {
    await l.acquire({ tokenId: TOKEN, caller, count: 1, class: 'reports', limits: learnedSet, setId: SET });
    return l.reportVendorFeedback({
      tokenId: TOKEN,
      caller,
      limits: learnedSet,
      setId: SET,
      class: 'reports',
      limit,
      remaining: limit - 1,
      reset: seconds(clock.now()) + resetIn(windowSeconds),
    });
  };
  /** The class's limits in force, as [limit, window] in window order. */
  const inForce = async (l: DynamoRateLedger) =>
    ((await l.learned(SET)).reports ?? [])
      .map((limit) => [limit.limit, limit.windowSeconds])
      .sort((a, b) => (a[1] ?? 0) - (b[1] ?? 0));
  /** The class's rings a grant is checked against: the learned limits, or the probe's 1 per 10 s. */
  const ringsOfGrant = async (l: DynamoRateLedger) =>
    granted(
      await l.acquire({
        tokenId: TOKEN,
        caller: 'x',
        count: 1,
        class: 'reports',
        limits: learnedSet,
        setId: SET,
      }),
    )
      .remaining.filter((w) => w.class === 'reports')
      .map((w) => [w.limit, w.windowSeconds])
      .sort((a, b) => (a[1] ?? 0) - (b[1] ?? 0));

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    table = await dynamo.createTable('ledger-renewal');
    clock = new ManualClock(T0);
  });

  it('one caller reporting only one of two limits keeps both in force, for minutes, whichever it reports', async () => {
    const a = ledger();
    await teachBy(a, ONE_PRINCIPAL, 10, 10);
    await teachBy(a, ONE_PRINCIPAL, 30, 60);
    expect(await inForce(a)).toEqual([
      [10, 10],
      [30, 60],
    ]);
    // Three minutes of answers telling only the 10 s window, then three of only the minute's: a report every 3 s.
    for (const [limit, window] of [
      [10, 10],
      [30, 60],
    ] as const) {
      for (let step = 0; step < 60; step++) {
        await clock.advance(3000);
        await teachBy(a, ONE_PRINCIPAL, limit, window);
        expect(await inForce(a)).toEqual([
          [10, 10],
          [30, 60],
        ]);
      }
    }
    // Still provisional (one caller's word), and the class is held to both, not to the probe.
    expect(
      Object.values(await a.learned(SET))
        .flat()
        .every((l) => l.until !== undefined),
    ).toBe(true);
    expect(await ringsOfGrant(ledger())).toEqual([
      [10, 10],
      [30, 60],
    ]);
  });

  it('a caller that stops reporting: its limits end within its longest window (and three margins), then the probe', async () => {
    const a = ledger();
    await teachBy(a, ONE_PRINCIPAL, 10, 10);
    await teachBy(a, ONE_PRINCIPAL, 30, 60);
    for (let step = 0; step < 40; step++) {
      await clock.advance(3000);
      await teachBy(a, ONE_PRINCIPAL, 10, 10);
    }
    const last = clock.now();
    await clock.advance(10_000 + 3 * MARGIN_MS);
    expect(await inForce(a)).toEqual([
      [10, 10],
      [30, 60],
    ]);
    await clock.advance(last + 60_000 + 3 * MARGIN_MS - clock.now());
    expect(await inForce(a)).toEqual([]);
    expect(await ringsOfGrant(ledger())).toEqual([[1, 10]]);
  });

  it("another caller's reports renew none of its limits: they corroborate only what they report", async () => {
    const a = ledger();
    await teachBy(a, ONE_PRINCIPAL, 10, 10);
    await teachBy(a, ONE_PRINCIPAL, 30, 60);
    const last = clock.now();
    // Another consumer tells only the minute's window, for two minutes: that one is kept, the 10 s one ends.
    for (let step = 0; step < 40; step++) {
      await clock.advance(3000);
      await teachBy(a, OTHER, 30, 60);
      // The 10 s limit lasts its caller's longest window (the minute's) and three margins after its report (T3).
      if (clock.now() >= last + 60_000 + 3 * MARGIN_MS) expect(await inForce(a)).toEqual([[30, 60]]);
    }
    expect(await a.learned(SET)).toEqual({
      reports: [{ limit: 30, windowSeconds: 60, learnedAt: last, by: expect.any(String) }],
    });
  });
});
