import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, LedgerUnavailableError, ReceiptRejectedError } from '../shared/ledger/index.js';
import { LedgerTable } from '../shared/ledger/item/index.js';
import { stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { parseReceipt } from '../shared/ledger/receipts.js';
import { emptyRing, usedAt } from '../shared/ledger/ring.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import {
  advanceInRandomSteps,
  maxInAnySpan,
  seededRandom,
  type TimedCount,
} from './support/ledger-harness.js';
import { propertyRuns } from './support/property-runs.js';

/**
 * The reservations' promise, against dynalite, for random reservations and random demand: a few reserved
 * consumers (some reserved in every window, one in the minute only) and greedy unreserved ones, in 6 processes
 * racing conditional writes, with give-backs by receipt. (1) Whatever happens, the sends of granted permits
 * never exceed 50 in any 60 s nor 1000 in any 3600 s. (2) A consumer reserved in every window that asks for
 * permits within what its reservation has left is never denied for QUOTA (a vendor cooldown or cap may still
 * hold everyone: those are other reasons). "Within" is judged by the consumer's own books, conservatively:
 * the reserved part of every grant it received (its signed receipt says how much), and all of every attempt
 * that failed without an answer (it may have been recorded), count against its reservation for a span plus a
 * slot; give-backs are not credited.
 * Faults: throttles and 500s (retried by the SDK, never applied) leave (2) exact. A lost answer of an applied
 * write is the one thing the ledger cannot always tell apart (dynamo-ledger.ts: such a grant is "failed closed
 * or counted twice"): counted twice, it takes the consumer's reservation for a grant it never received, which
 * its books cannot see. So each such denial is checked against the item itself, read at once (no other
 * consumer writes to a reservation's ring): its reservation ring holds more than its books say (a grant counted
 * twice) explains it; nothing else may. Without lost answers, there is none.
 */
const SEED = Number(process.env.LEDGER_PROPERTY_SEED ?? 20261124);
/**
 * Random cases per fault mode (each 40 simulated minutes, its own seed): `npm test` runs the first 20 minutes of the
 * first of them (the same seed, so the same run up to its end); the counts that show a case was exercised are per
 * minute (SHARE of test:long's).
 */
const CASES = propertyRuns({ quick: 1, full: 3 });
const CASE_MINUTES = propertyRuns({ quick: 20, full: 40 });
const SHARE = CASE_MINUTES / 40;
const TOKEN = 'b0c1d2e3f4a59687';
const PROCESSES = 6;
const GREEDY = 8;
/** The ledger's default margin: each window's grants are counted over the window plus it. */
const MARGIN_MS = rateLimitSettingsSchema.parse({}).marginSeconds * 1000;
const WINDOWS = [
  { seconds: 60, limit: 50, spanMs: 60_000 + MARGIN_MS, slotMs: 1000, key: `*/${(60_000).toString(36)}` },
  {
    seconds: 3600,
    limit: 1000,
    spanMs: 3600_000 + MARGIN_MS,
    slotMs: 60_000,
    key: `*/${(3600_000).toString(36)}`,
  },
];
type FaultMode = 'none' | 'retried' | 'lost answers';

interface Reserved {
  name: string;
  /** By window seconds; a consumer reserved in every window has both. */
  perWindow: Record<string, number>;
}

/** 1-3 consumers reserved in both windows, sometimes one more in the minute only; at most 90 % reserved. */
function randomReservations(random: () => number): Reserved[] {
  const strict = 1 + Math.floor(random() * 3);
  let minuteLeft = 45;
  let hourLeft = 900;
  const out: Reserved[] = [];
  for (let i = 0; i < strict; i++) {
    const minute = 1 + Math.floor(random() * Math.min(20, minuteLeft - (strict - i)));
    // Enough of the hour for its minute share most of the run (so that its asks test the minute's rings too).
    const hour = Math.min(hourLeft - (strict - i - 1), minute * 15 + Math.floor(random() * 100));
    minuteLeft -= minute;
    hourLeft -= hour;
    out.push({ name: `reserved-${i}`, perWindow: { 60: minute, 3600: hour } });
  }
  if (random() < 0.5 && minuteLeft > 1)
    out.push({ name: 'minute-only', perWindow: { 60: 1 + Math.floor(random() * Math.min(10, minuteLeft)) } });
  return out;
}

interface Figures {
  kept: TimedCount[];
  sends: TimedCount[];
  /** Asks of a reserved-everywhere consumer within its reservation, and how many were denied for QUOTA. */
  withinAsks: number;
  withinDeniedQuota: number;
  /** Of those, the ones whose reservation ring held more than the consumer's books (grants counted twice). */
  countedTwice: number;
  withinGranted: number;
  unavailable: number;
  returned: number;
}

async function run(options: {
  dynamo: LocalDynamo;
  faults: FaultMode;
  seed: number;
  durationMs: number;
}): Promise<{ figures: Figures; reservations: Reserved[]; injected: number; lostAnswers: number }> {
  const random = seededRandom(options.seed);
  const reservations = randomReservations(random);
  const limits: RateLimitSettings = rateLimitSettingsSchema.parse({
    reservations: reservations.map((r) => ({ consumer: r.name, perWindow: r.perWindow })),
  });
  const table = await options.dynamo.createTable('reservations-property');
  const clock = new ManualClock();
  const end = clock.now() + options.durationMs;
  const faulty = Array.from({ length: PROCESSES }, (_, p) =>
    createFaultyDynamoDbClient({
      endpoint: options.dynamo.endpoint,
      seed: options.seed + p,
      lostAnswer: options.faults === 'lost answers' ? 0.08 : 0,
      throttle: options.faults === 'none' ? 0 : 0.05,
      serverError: options.faults === 'none' ? 0 : 0.05,
    }),
  );
  const plan = planFor(limits);
  // A fault-free reader, to look at the item when a reservation is denied.
  const inspector = new LedgerTable(options.dynamo.client, table, clock);
  /** Whether a window's reservation ring of `name` holds more than `booked`, with k more asked, over its limit. */
  const ringExplains = async (name: string, k: number, booked: Map<string, number>) => {
    const g = clock.now();
    const state = stateAt((await inspector.read(TOKEN)).state, g, plan.marginMs);
    return WINDOWS.some((w) => {
      const own = plan.reserved.get(w.key)?.reserved.get(name);
      if (!own) return false;
      const used = usedAt(own, state.rings.get(own.key) ?? emptyRing(), g);
      return used > (booked.get(w.key) ?? 0) && used + k > own.limit;
    });
  };
  const ledgers = faulty.map(
    (f) => new DynamoRateLedger({ client: f.client, tableName: table, clock, conflictJitterMs: 2 }),
  );
  const figures: Figures = {
    kept: [],
    sends: [],
    withinAsks: 0,
    withinDeniedQuota: 0,
    countedTwice: 0,
    withinGranted: 0,
    unavailable: 0,
    returned: 0,
  };
  let stopped = false;

  const keep = (grantedAt: number, validUntil: number, count: number) => {
    if (count <= 0) return;
    figures.kept.push({ time: grantedAt, count });
    for (let i = 0; i < count; i++)
      figures.sends.push({ time: grantedAt + Math.floor(random() * (validUntil - grantedAt + 1)), count: 1 });
  };

  const giveBack = async (ledger: DynamoRateLedger, caller: string, receipt: string, count: number) => {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        figures.returned += (
          await ledger.giveBack({ tokenId: TOKEN, caller, receipt, count, limits })
        ).returned;
        return;
      } catch (error) {
        if (error instanceof ReceiptRejectedError) return;
        if (!(error instanceof LedgerUnavailableError)) throw error;
        figures.unavailable++;
      }
    }
  };

  /** One consumer's loop. `reserved`: its reservation (consumer name and amounts), if any. */
  const consumer = async (ledger: DynamoRateLedger, caller: string, reserved: Reserved | undefined) => {
    // Its own books per window: the reserved part of every grant, all of every unanswered attempt, at the
    // latest time it could have been recorded.
    const books = new Map<string, TimedCount[]>(WINDOWS.map((w) => [w.key, []]));
    const everywhere = reserved !== undefined && WINDOWS.every((w) => reserved.perWindow[w.seconds]);
    const booked = () =>
      new Map(
        WINDOWS.map((w) => {
          const since = clock.now() - w.spanMs - w.slotMs;
          return [
            w.key,
            (books.get(w.key) ?? []).reduce((sum, b) => sum + (b.time > since ? b.count : 0), 0),
          ];
        }),
      );
    const within = (k: number) => {
      const used = booked();
      return (
        everywhere &&
        WINDOWS.every((w) => (used.get(w.key) ?? 0) + k <= (reserved?.perWindow[w.seconds] ?? 0))
      );
    };
    const book = (counts: Map<string, number> | number) => {
      for (const w of WINDOWS)
        books.get(w.key)?.push({
          time: clock.now(),
          count: typeof counts === 'number' ? counts : (counts.get(w.key) ?? 0),
        });
    };
    while (!stopped) {
      const count = 1 + Math.floor(random() * 4);
      const inside = within(count);
      // Reserved consumers mostly stay within their reservation, sometimes borrow; the others always ask.
      if (reserved && !inside && random() < 0.9) {
        await clock.sleep(200 + Math.floor(random() * 3000));
        continue;
      }
      if (inside) figures.withinAsks++;
      try {
        const decision = await ledger.acquire({
          tokenId: TOKEN,
          caller,
          count,
          limits,
          ...(reserved ? { consumer: reserved.name } : {}),
        });
        if (!decision.granted) {
          if (inside && decision.reason === 'QUOTA') {
            figures.withinDeniedQuota++;
            if (reserved && (await ringExplains(reserved.name, count, booked()))) figures.countedTwice++;
          }
          await clock.sleep(reserved ? Math.min(decision.retryAfterMs, 2000) : decision.retryAfterMs);
          continue;
        }
        if (inside) figures.withinGranted++;
        if (everywhere) book(new Map(parseReceipt(decision.receipt)?.claims.split ?? []));
        let kept = count;
        if (random() < 0.15) {
          const back = 1 + Math.floor(random() * count);
          kept -= back;
          await giveBack(ledger, caller, decision.receipt, back);
        }
        keep(decision.grantedAt, decision.validUntil, kept);
        await clock.sleep(Math.floor(random() * (reserved ? 1500 : 500)));
      } catch (error) {
        if (!(error instanceof LedgerUnavailableError)) throw error;
        figures.unavailable++;
        if (everywhere) book(count);
        await clock.sleep(100 + Math.floor(random() * 900));
      }
    }
  };

  const loops = [
    ...reservations.map((r, i) => consumer(ledgers[i % PROCESSES] as DynamoRateLedger, r.name, r)),
    ...Array.from({ length: GREEDY }, (_, i) =>
      consumer(ledgers[i % PROCESSES] as DynamoRateLedger, `greedy-${i}`, undefined),
    ),
  ];
  await advanceInRandomSteps(clock, loops.length, end, random);
  stopped = true;
  await clock.advance(4 * 3600_000);
  await Promise.all(loops);
  const injected = faulty.reduce(
    (sum, f) => sum + f.faults.stats.lostAnswer + f.faults.stats.throttle + f.faults.stats.serverError,
    0,
  );
  const lostAnswers = faulty.reduce((sum, f) => sum + f.faults.stats.lostAnswer, 0);
  for (const f of faulty) f.client.destroy();
  return { figures, reservations, injected, lostAnswers };
}

const summarise = (
  seed: number,
  result: { figures: Figures; reservations: Reserved[]; injected: number; lostAnswers: number },
) => ({
  seed,
  reservations: result.reservations.map((r) => `${r.name}:${JSON.stringify(r.perWindow)}`),
  injected: result.injected,
  lostAnswers: result.lostAnswers,
  kept: result.figures.kept.reduce((sum, k) => sum + k.count, 0),
  withinAsks: result.figures.withinAsks,
  withinGranted: result.figures.withinGranted,
  withinDeniedQuota: result.figures.withinDeniedQuota,
  countedTwice: result.figures.countedTwice,
  unavailable: result.figures.unavailable,
  returned: result.figures.returned,
  maxKeptInSpan: maxInAnySpan(result.figures.kept, 60_000 + MARGIN_MS),
  maxSent60s: maxInAnySpan(result.figures.sends, 60_000),
});

/** (1): no span of sends or of grants (with the margin) over a limit. */
function expectBound(figures: Figures, summary: object): void {
  expect(maxInAnySpan(figures.sends, 60_000), JSON.stringify(summary)).toBeLessThanOrEqual(50);
  expect(maxInAnySpan(figures.sends, 3600_000)).toBeLessThanOrEqual(1000);
  expect(maxInAnySpan(figures.kept, 60_000 + MARGIN_MS)).toBeLessThanOrEqual(50);
  expect(maxInAnySpan(figures.kept, 3600_000 + MARGIN_MS)).toBeLessThanOrEqual(1000);
  // The property was exercised: the reserved consumers asked within their reservation, and got it (their hour
  // reservations, a few hundred, bound how often in 40 minutes: 30 in 40, per minute run)...
  expect(figures.withinGranted).toBeGreaterThan(30 * SHARE);
  // ...while the greedy consumers kept the limits busy.
  expect(maxInAnySpan(figures.kept, 60_000 + MARGIN_MS)).toBeGreaterThanOrEqual(45);
}

// Timeouts of 600 s bound a hang: each case is 40 simulated minutes, 10-40 s of real time.
describe('rate ledger reservations property: random reservations and demand', () => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it.each([
    ['without faults', 'none'],
    ['while DynamoDB throttles and fails (the SDK retries)', 'retried'],
  ] as const)(
    'never exceeds any limit in any span and never denies a reservation for quota, %s',
    async (_, faults) => {
      for (let c = 0; c < CASES; c++) {
        const seed = SEED + c * 1000 + (faults === 'none' ? 0 : 500);
        const result = await run({ dynamo, faults, seed, durationMs: CASE_MINUTES * 60_000 });
        const summary = summarise(seed, result);
        console.info(JSON.stringify(summary));
        expectBound(result.figures, summary);
        expect(result.figures.withinDeniedQuota, JSON.stringify(summary)).toBe(0);
        if (faults === 'retried') expect(result.injected).toBeGreaterThan(50 * SHARE);
      }
    },
    600_000,
  );

  it('never exceeds any limit in any span and never denies a reservation for quota, while DynamoDB also loses answers of applied writes', async () => {
    for (let c = 0; c < CASES; c++) {
      const seed = SEED + c * 1000 + 700;
      const result = await run({ dynamo, faults: 'lost answers', seed, durationMs: CASE_MINUTES * 60_000 });
      const summary = summarise(seed, result);
      console.info(JSON.stringify(summary));
      expectBound(result.figures, summary);
      expect(result.lostAnswers).toBeGreaterThan(50 * SHARE);
      // A write whose answer was lost is told by its id, in the item's write ids or carried by the full writes
      // after it (receipts.ts, CARRIED_WRITE_IDS): never decided again, so never counted twice.
      expect(result.figures.countedTwice, JSON.stringify(summary)).toBe(0);
      expect(result.figures.withinDeniedQuota, JSON.stringify(summary)).toBe(0);
    }
  }, 600_000);
});
