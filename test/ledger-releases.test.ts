import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import { currentRelease, type LedgerRelease, previousRelease } from './support/previous-release.js';
import { enginesTakingTurns } from './support/property-runs.js';
import { type Ask, type Granted, ReleaseWorld, type Side, TOKEN } from './support/release-world.js';

/**
 * Rolling forward and back (docs/deploying.md): during a canary the next release and this one write the same
 * ledger items, and after a rollback the previous release reads what the newer one wrote. So release N-1's
 * ledger (test/previous-release.json, taken from git) runs beside the current one on one table, one item and
 * one simulated clock, on both DynamoDB engines: each reads what the other wrote, keeps granting within the
 * limits, takes the other's receipts back, and never fails on the other's item.
 */

/** Settings both releases accept: the vendor's limits, a class, and (in the second) a reservation. */
const SETTINGS = [
  { name: 'a class', raw: { classes: { reports: [{ limit: 10, windowSeconds: 60 }] } } },
  {
    name: 'a class and a reservation',
    raw: {
      classes: { reports: [{ limit: 10, windowSeconds: 60 }] },
      reservations: [{ consumer: 'trading', perWindow: { '60': 10, '3600': 200 } }],
    },
  },
];

interface World extends ReleaseWorld {
  previous: LedgerRelease;
}

/**
 * A scenario: its settings (raw: each release parses them with its own schema) and what it does with the two
 * releases. To add one, add an entry; `world.failsClosed` checks a release refuses without granting. The next
 * item encoding adds "a plan N-1 cannot encode (more classes than it allows): N-1 fails closed
 * (LedgerUnavailable, no grant), never over-grants".
 */
interface Scenario {
  name: string;
  settings: unknown;
  run(world: World): Promise<void>;
}

const SCENARIOS: Scenario[] = [
  ...SETTINGS.flatMap(({ name, raw }) => [
    {
      name: `current writes, N-1 reads and keeps granting (${name})`,
      settings: raw,
      run: (world: World) => handOver(world, currentRelease, world.previous),
    },
    {
      name: `N-1 writes, current reads and keeps granting (${name})`,
      settings: raw,
      run: (world: World) => handOver(world, world.previous, currentRelease),
    },
  ]),
  {
    // Item format 2 (packed): what this release writes for settings the previous one refused, or where a stage
    // asks for it. The previous release cannot read it; it must grant nothing rather than read empty rings.
    name: 'an item in format 2, which N-1 cannot read: it fails closed, grants nothing, and writes nothing over it',
    settings: { itemFormat: 2, ...SETTINGS[0]?.raw },
    async run(world) {
      const current = world.side(currentRelease);
      const previous = world.side(world.previous);
      await world.grant(current, { count: 5 });
      await world.grant(current, { count: 2, class: 'reports' });
      const before = await world.client.send(
        new GetItemCommand({
          TableName: world.table,
          Key: { pk: { S: `token#${TOKEN}` } },
          ConsistentRead: true,
        }),
      );
      expect(before.Item?.rb?.B).toBeDefined();
      await world.failsClosed(previous, { count: 1 });
      await world.failsClosed(previous, { count: 1, class: 'reports' });
      await expect(previous.ledger.remaining(TOKEN, previous.limits)).rejects.toBeInstanceOf(
        world.previous.LedgerUnavailableError,
      );
      const after = await world.client.send(
        new GetItemCommand({
          TableName: world.table,
          Key: { pk: { S: `token#${TOKEN}` } },
          ConsistentRead: true,
        }),
      );
      expect(after.Item).toEqual(before.Item);
      // And the current release goes on from it: the 5 and the 2 (a class grant counts in general too) still count.
      const left = await current.ledger.remaining(TOKEN, current.limits);
      expect(left.map((w) => w.remaining)).toEqual([43, 993, 8]);
    },
  },
];

/**
 * One release (`from`) uses the item in every way there is, then the other (`to`) takes over while `from`
 * keeps running, as during a canary shift or right after a rollback: `to` sees `from`'s grants, give-backs,
 * cooldown and vendor caps, fills the minute to its limit and no further, the two give back each other's
 * receipts, and after the span both grant again.
 */
async function handOver(world: World, from: LedgerRelease, to: LedgerRelease): Promise<void> {
  const writer = world.side(from);
  const reader = world.side(to);
  const reserved = (writer.limits.reservations ?? []).length > 0;
  const now = () => Math.floor(world.clock.now() / 1000);

  // The writer's use: grants of each kind, a give-back, a class cap and a cooldown from the vendor.
  const general = await world.grant(writer, { count: 5, caller: 'svc-a' });
  const reports = await world.grant(writer, { count: 3, class: 'reports', caller: 'svc-b' });
  if (reserved) await world.grant(writer, { count: 4, consumer: 'trading', caller: 'trading' });
  expect(await world.giveBack(writer, general, 1)).toBe(1);
  await writer.ledger.reportVendorFeedback({
    tokenId: TOKEN,
    limits: writer.limits,
    limit: 10,
    remaining: 2,
    reset: now() + 5,
  });
  await writer.ledger.reportVendorFeedback({ tokenId: TOKEN, limits: writer.limits, retryAfterSeconds: 1 });

  // The reader sees all of it: the cooldown, then the vendor's cap on the class.
  expect((await world.deny(reader, { count: 1, caller: 'svc-c' })).reason).toBe('COOLDOWN');
  await world.expectRemainingSafe(reader);
  await world.clock.advance(1000);
  for (const side of [reader, writer]) await world.expectRemainingSafe(side);
  expect((await world.deny(reader, { count: 3, class: 'reports', caller: 'svc-c' })).reason).toBe(
    'VENDOR_CAP',
  );
  const readerReports = await world.grant(reader, { count: 2, class: 'reports', caller: 'svc-c' });

  // Receipts cross: each gives back a grant of the other.
  expect(await world.giveBack(reader, reports, 2)).toBe(2);
  expect(await world.giveBack(writer, readerReports, 1)).toBe(1);

  // The reader fills the minute: to its limit, counting the writer's grants, and no further; so does the
  // reserved consumer's reservation.
  const full = await world.fill(reader, { count: 5, caller: 'svc-c' });
  expect(full.reason).toBe('QUOTA');
  if (reserved) {
    await world.grant(reader, { count: 6, consumer: 'trading', caller: 'trading' });
    expect((await world.deny(reader, { count: 1, consumer: 'trading', caller: 'trading' })).reason).toBe(
      'QUOTA',
    );
  }
  expect((await world.deny(writer, { count: 1, caller: 'svc-a' })).reason).toBe('QUOTA');
  const [minute] = world.windows(reader);
  expect(world.keptInSpanEndingNow(reader, minute as { windowSeconds: number })).toBe(minute?.limit);
  for (const side of [reader, writer]) await world.expectRemainingSafe(side);

  // A give-back of the reader's grant to the writer frees room the reader sees. The current release records a
  // receipt of release N-1 (it carries no caller mark) only while two whole caller shares of the spent places
  // are left beside it (three places are taken here): else 200 "not recorded", its permits age out (safe).
  const last = world.grants.filter((g) => g.by === to.name && g.count === 5).at(-1) as Granted;
  await world.clock.advance(500);
  const back = await world.giveBack(writer, last, 3);
  expect(back).toBe(from === currentRelease ? 0 : 3);
  if (back > 0) await world.grant(reader, { count: back, caller: 'svc-c' });
  expect((await world.deny(reader, { count: 1, caller: 'svc-c' })).reason).toBe('QUOTA');

  // After the span, both grant again.
  const retry = full.retryAfterMs;
  await world.clock.advance(retry + 1000);
  for (const side of [writer, reader, writer]) await world.grant(side, { count: 10, caller: 'svc-d' });
  for (const side of [reader, writer]) await world.expectRemainingSafe(side);
  const [fullest] = world.expectBound(reader);
  world.expectBound(writer);
  // Not vacuous: the minute was used to its limit, by both releases.
  expect(fullest).toBe(minute?.limit);
  expect(new Set(world.grants.map((g) => g.by))).toEqual(new Set([from.name, to.name]));
}

/**
 * Loaded by each test, not in a hook: where release N-1 cannot be had (a shallow clone), every test fails with
 * the reason, instead of a failed hook reporting them skipped.
 */
let loading: Promise<LedgerRelease> | undefined;
const loadPrevious = (): Promise<LedgerRelease> =>
  (loading ??= previousRelease().then((loaded) => {
    const how =
      loaded.extractedInMs === undefined ? 'already extracted' : `extracted in ${loaded.extractedInMs} ms`;
    console.info(`release N-1 ${loaded.commit}: ${how}`);
    return loaded;
  }));

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on DynamoDB Local,
// test:long on dynalite (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 1);

describe.each(IN_TURN)('ledger releases side by side on %s', (engine) => {
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

  const worldFor = async (settings: unknown, clock = new ManualClock()): Promise<World> =>
    Object.assign(new ReleaseWorld(client, await dynamo.createTable('ledger-releases'), clock, settings), {
      previous: await loadPrevious(),
    });

  it.each(SCENARIOS)('$name', async (scenario) => {
    await scenario.run(await worldFor(scenario.settings));
  });

  /**
   * Both releases at once, as during a canary shift: two processes of each (their own caches and faulty clients:
   * 10 % of applied writes lose their answer and are re-sent by the SDK, 2 % are throttled), random asks,
   * give-backs of either release's receipts and vendor reports, the steps between two moves of the clock racing.
   * The only failures allowed are the ledger failing closed on a fault (never an item it cannot read), a
   * re-sent give-back finding its receipt spent, and a give-back after the permits' validity finding it expired.
   */
  it('I4: keeps the bound when both releases grant, give back and report at random, with lost answers', async () => {
    const previous = await loadPrevious();
    const stats = {
      runs: 0,
      grants: new Map<string, number>(),
      unavailable: 0,
      lostAnswers: 0,
      fullest: [0, 0, 0],
    };
    const ask = fc.record({
      kind: fc.constant('ask' as const),
      previous: fc.boolean(),
      process: fc.nat(1),
      count: fc.integer({ min: 1, max: 8 }),
      cls: fc.constantFrom(undefined, 'reports'),
      consumer: fc.constantFrom(undefined, 'trading'),
      caller: fc.constantFrom('c0', 'c1', 'c2'),
    });
    const giveBack = fc.record({
      kind: fc.constant('giveBack' as const),
      previous: fc.boolean(),
      process: fc.nat(1),
      pick: fc.nat(),
      share: fc.double({ min: 0, max: 1, noNaN: true }),
    });
    const report = fc.record({
      kind: fc.constant('report' as const),
      previous: fc.boolean(),
      process: fc.nat(1),
      retryAfterSeconds: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      limit: fc.constantFrom(50, 10),
      remaining: fc.integer({ min: 0, max: 20 }),
      resetIn: fc.integer({ min: 1, max: 30 }),
    });
    const advance = fc.record({
      kind: fc.constant('advance' as const),
      ms: fc.integer({ min: 0, max: 6000 }),
    });
    const steps = fc.array(
      fc.oneof(
        { weight: 8, arbitrary: ask },
        { weight: 3, arbitrary: giveBack },
        { weight: 1, arbitrary: report },
        { weight: 3, arbitrary: advance },
      ),
      { minLength: 30, maxLength: 80 },
    );

    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...SETTINGS), steps, fc.nat(), async ({ raw }, plan, seed) => {
        stats.runs++;
        const world = await worldFor(raw);
        const faulty = [0, 1, 2, 3].map((i) =>
          createFaultyDynamoDbClient({
            endpoint: dynamo.endpoint,
            seed: seed + i,
            lostAnswer: 0.1,
            throttle: 0.02,
          }),
        );
        const sides = new Map<string, Side>(
          [previous, currentRelease].flatMap((release, r) =>
            [0, 1].map((p) => [`${r === 0}/${p}`, world.side(release, faulty[2 * r + p]?.client)] as const),
          ),
        );
        const sideOf = (step: { previous: boolean; process: number }) =>
          sides.get(`${step.previous}/${step.process}`) as Side;
        /** Allowed failures: fail closed on faults (never because an item could not be read). */
        const unavailable = (side: Side, error: unknown): boolean => {
          if (!(error instanceof side.release.LedgerUnavailableError)) return false;
          expect((error as Error).message).not.toMatch(/unreadable/);
          stats.unavailable++;
          return true;
        };
        const run = async (step: (typeof plan)[number]): Promise<void> => {
          if (step.kind === 'advance') return;
          const side = sideOf(step);
          try {
            if (step.kind === 'ask') {
              const request: Ask = { count: step.count, caller: step.caller };
              if (step.cls) request.class = step.cls;
              if (step.consumer) request.consumer = step.consumer;
              await world.ask(side, request);
            } else if (step.kind === 'report') {
              await side.ledger.reportVendorFeedback({
                tokenId: TOKEN,
                limits: side.limits,
                ...(step.retryAfterSeconds
                  ? { retryAfterSeconds: step.retryAfterSeconds }
                  : {
                      limit: step.limit,
                      remaining: step.remaining,
                      reset: Math.floor(world.clock.now() / 1000) + step.resetIn,
                    }),
              });
            } else {
              const open = world.grants.filter((g) => !g.returned && g.kept > 0);
              const grant = open[step.pick % Math.max(1, open.length)];
              if (!grant) return;
              const count = Math.max(1, Math.round(step.share * grant.kept));
              // Like the client library: re-sent with the same receipt while the ledger gives no answer.
              let resent = false;
              grant.returned = true;
              for (let attempt = 0; attempt < 3; attempt++) {
                try {
                  const result: { notRecorded?: string } = await side.ledger.giveBack({
                    tokenId: TOKEN,
                    caller: grant.caller,
                    receipt: grant.receipt,
                    count,
                    limits: side.limits,
                  });
                  // Not recorded (the current release had no place for it): nothing changed, it still counts.
                  if (result.notRecorded === undefined) grant.kept -= count;
                  return;
                } catch (error) {
                  if (error instanceof side.release.ReceiptRejectedError) {
                    const problem = (error as Error & { problem: string }).problem;
                    const late = world.clock.now() > grant.validUntil;
                    // Spent on a re-send: an earlier attempt applied it.
                    if (problem === 'SPENT' && resent) grant.kept -= count;
                    if ((problem === 'SPENT' && resent) || (problem === 'EXPIRED' && late)) return;
                    throw error;
                  }
                  if (!unavailable(side, error)) throw error;
                  resent = true;
                }
              }
            }
          } catch (error) {
            if (!unavailable(side, error)) throw error;
          }
        };
        try {
          // Steps between two advances of the clock run concurrently: the releases' writes race. Each batch is
          // settled in full before its first failure is thrown, so that nothing is left running.
          const settle = async (batch: Promise<void>[]) => {
            const failed = (await Promise.allSettled(batch)).find((r) => r.status === 'rejected');
            if (failed) throw failed.reason;
          };
          let batch: Promise<void>[] = [];
          for (const step of plan) {
            if (step.kind !== 'advance') {
              batch.push(run(step));
              continue;
            }
            await settle(batch);
            batch = [];
            await world.clock.advance(step.ms);
          }
          await settle(batch);
          const checker = world.side(currentRelease);
          // The fullest span of each window (general minute and hour, the class's minute) over the runs.
          stats.fullest = world.expectBound(checker).map((most, i) => Math.max(most, stats.fullest[i] ?? 0));
          await world.expectRemainingSafe(checker);
          await world.expectRemainingSafe(world.side(previous));
        } finally {
          for (const f of faulty) {
            stats.lostAnswers += f.faults.stats.lostAnswer;
            f.client.destroy();
          }
        }
        for (const g of world.grants) stats.grants.set(g.by, (stats.grants.get(g.by) ?? 0) + 1);
      }),
      { numRuns: 30, seed: Number(process.env.LEDGER_PROPERTY_SEED ?? 20261127), endOnFailure: true },
    );
    console.info(JSON.stringify({ ...stats, grants: Object.fromEntries(stats.grants) }));
    // The property was exercised: both releases granted, and answers of applied writes were lost.
    expect(stats.runs).toBe(30);
    expect(stats.grants.get(previous.name)).toBeGreaterThan(100);
    expect(stats.grants.get(currentRelease.name)).toBeGreaterThan(100);
    expect(stats.lostAnswers).toBeGreaterThan(50);
    // ...and some runs took the minute to within one ask (at most 8) of its limit, and the class's minute to its
    // limit: the bound was tested, not only respected.
    expect(stats.fullest[0]).toBeGreaterThan(50 - 8);
    expect(stats.fullest[2]).toBe(10);
  });
});
