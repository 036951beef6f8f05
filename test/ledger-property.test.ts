import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, LedgerUnavailableError, ReceiptRejectedError } from '../shared/ledger/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import {
  advanceInRandomSteps,
  idealGrantTimes,
  maxInAnySpan,
  seededRandom,
  type TimedCount,
} from './support/ledger-harness.js';
import { propertyRuns } from './support/property-runs.js';

/**
 * The ledger's promise, against dynalite: 20 consumers in 10 processes (10 ledger instances: separate caches,
 * racing conditional writes) ask for 1..5 permits at a time while a random clock moves; some give unused
 * permits back by receipt, some report what the vendor said. Each kept permit is sent at a random moment of its
 * validity: no 60 s span may see more than 50 sends, no 3600 s span more than 1000.
 */
const limits = rateLimitSettingsSchema.parse({}); // 50 per 60 s, 1000 per 3600 s, margin 3 s, validity 2 s
/** The ledger counts grants over each window plus its margin. */
const MARGIN_MS = limits.marginSeconds * 1000;
const PROCESSES = 10;
const CONSUMERS_PER_PROCESS = 2;
const TOKEN = 'a1b2c3d4e5f60718';
const SEED = Number(process.env.LEDGER_PROPERTY_SEED ?? 20260105);
/**
 * Simulated hours of each run. Without faults, `npm test` runs the first 1.5 h of test:long's run (the same seed,
 * so the same consumers and clock steps up to its end): the hour's limit binds, and utilisation is measured after
 * it. With faults, `npm test` runs the first half hour of test:long's 4 h (the same seed): the checks that the
 * faults and the operations really happened are per simulated hour, so test:long's are as before (2000 operations,
 * 100 lost answers, 20 throttles and 20 server errors in 4 h: "thousands of operations" takes more than 3 h, 1976
 * were seen in 3 h) and `npm test`'s are an eighth of them (issue 34: `npm test` in three minutes; it ran 2 h
 * before).
 */
const HOURS = {
  noFaults: propertyRuns({ quick: 1.5, full: 3.5 }),
  faults: propertyRuns({ quick: 0.5, full: 4 }),
};
/** The faulty run's share of test:long's 4 h: its "it happened" counts are per simulated hour. */
const FAULT_SHARE = HOURS.faults / 4;

interface Grant {
  grantedAt: number;
  validUntil: number;
  /** Permits kept for sending (granted minus those the consumer decided to give back). */
  kept: number;
}

interface RunFigures {
  grants: Grant[];
  asked: number;
  denials: number;
  unavailable: number;
  givenBack: number;
  /** Give-back operations (each may be re-sent a few times). */
  giveBacks: number;
  returned: number;
  refusedReceipts: Record<string, number>;
  reports: number;
}

/** Drives the consumers over `durationMs` of simulated time; every DynamoDB call goes through `clients[p]`. */
async function run(options: {
  dynamo: LocalDynamo;
  clients: FaultyDynamoDb['client'][];
  limits: RateLimitSettings;
  durationMs: number;
  giveBackShare: number;
  reportShare: number;
  seed: number;
}): Promise<RunFigures & { start: number; end: number }> {
  const random = seededRandom(options.seed);
  const table = await options.dynamo.createTable('ledger-property');
  const clock = new ManualClock();
  const start = clock.now();
  const end = start + options.durationMs;
  const ledgers = options.clients.map(
    (client) => new DynamoRateLedger({ client, tableName: table, clock, conflictJitterMs: 2 }),
  );
  const figures: RunFigures = {
    grants: [],
    asked: 0,
    denials: 0,
    unavailable: 0,
    givenBack: 0,
    giveBacks: 0,
    returned: 0,
    refusedReceipts: {},
    reports: 0,
  };
  let stopped = false;

  /** Like the client library: a give-back that got no answer is re-sent with the same receipt until it has one. */
  const giveBack = async (ledger: DynamoRateLedger, caller: string, receipt: string, count: number) => {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        figures.returned += (
          await ledger.giveBack({ tokenId: TOKEN, caller, receipt, count, limits: options.limits })
        ).returned;
        return;
      } catch (error) {
        if (error instanceof ReceiptRejectedError) {
          figures.refusedReceipts[error.problem] = (figures.refusedReceipts[error.problem] ?? 0) + 1;
          return;
        }
        if (!(error instanceof LedgerUnavailableError)) throw error;
        figures.unavailable++;
      }
    }
  };

  const consumer = async (ledger: DynamoRateLedger, caller: string) => {
    while (!stopped) {
      const count = 1 + Math.floor(random() * 5);
      figures.asked += count;
      try {
        const decision = await ledger.acquire({ tokenId: TOKEN, caller, count, limits: options.limits });
        if (!decision.granted) {
          figures.denials++;
          await clock.sleep(decision.retryAfterMs);
          continue;
        }
        const grant: Grant = { grantedAt: decision.grantedAt, validUntil: decision.validUntil, kept: count };
        figures.grants.push(grant);
        if (random() < options.giveBackShare) {
          const back = 1 + Math.floor(random() * count);
          // Decided not to send them: whatever the answer, these permits are never sent.
          grant.kept -= back;
          figures.givenBack += back;
          figures.giveBacks++;
          await giveBack(ledger, caller, decision.receipt, back);
        }
        if (random() < options.reportShare) {
          figures.reports++;
          const nowSeconds = Math.floor(clock.now() / 1000);
          await ledger.reportVendorFeedback(
            random() < 0.5
              ? { tokenId: TOKEN, limits: options.limits, retryAfterSeconds: 1 + Math.floor(random() * 3) }
              : {
                  tokenId: TOKEN,
                  limits: options.limits,
                  limit: random() < 0.5 ? 50 : 1000,
                  remaining: Math.floor(random() * 20),
                  reset: nowSeconds + 1 + Math.floor(random() * 30),
                },
          );
        }
        await clock.sleep(Math.floor(random() * 2000));
      } catch (error) {
        if (!(error instanceof LedgerUnavailableError)) throw error;
        figures.unavailable++;
        await clock.sleep(100 + Math.floor(random() * 900));
      }
    }
  };
  const consumers = ledgers.flatMap((ledger, p) =>
    Array.from({ length: CONSUMERS_PER_PROCESS }, (_, c) => consumer(ledger, `consumer-${p}-${c}`)),
  );
  await advanceInRandomSteps(clock, consumers.length, end, random);
  stopped = true;
  await clock.advance(4 * 3600_000);
  await Promise.all(consumers);
  return { ...figures, start, end };
}

/** What the vendor would see: each kept permit sent at a random moment of its validity. */
function sendsOf(grants: readonly Grant[], random: () => number): TimedCount[] {
  return grants.flatMap((g) =>
    Array.from({ length: g.kept }, () => ({
      time: g.grantedAt + Math.floor(random() * (g.validUntil - g.grantedAt + 1)),
      count: 1,
    })),
  );
}

// Timeouts of 600 s bound a hang: simulated hours take 40-90 s of real time idle, over 3 min on a loaded machine.
describe('rate ledger property: concurrent consumers over simulated hours', () => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it('I1: never exceeds 50 in any 60 s or 1000 in any 3600 s of sends, and uses ≥ 97 % of what the limits allow', async () => {
    const figures = await run({
      dynamo,
      clients: Array.from({ length: PROCESSES }, () => dynamo.client),
      limits,
      durationMs: HOURS.noFaults * 3600_000,
      giveBackShare: 0.1,
      reportShare: 0,
      seed: SEED,
    });
    const random = seededRandom(SEED + 1);
    const sends = sendsOf(figures.grants, random);
    const kept: TimedCount[] = figures.grants.map((g) => ({ time: g.grantedAt, count: g.kept }));

    // "Allow": the most ANY scheduler could have let through over the same run under the vendor's own limits
    // (exact sliding windows, no margin): the greedy schedule, optimal for every prefix (see idealGrantTimes).
    const ideal = idealGrantTimes(
      [
        { limit: 50, windowMs: 60_000 },
        { limit: 1000, windowMs: 3600_000 },
      ],
      figures.start,
      figures.end,
    );
    const keptBy = (t: number) => kept.reduce((sum, k) => sum + (k.time <= t ? k.count : 0), 0);
    const idealBy = (t: number) => ideal.filter((time) => time <= t).length;
    // Over the run as it goes, not only at its end: averaged over every minute after the first hour.
    let sum = 0;
    let samples = 0;
    for (let t = figures.start + 3600_000; t <= figures.end; t += 60_000) {
      sum += keptBy(t) / idealBy(t);
      samples++;
    }
    const runningUtilisation = sum / samples;
    const utilisation = sends.length / ideal.length;
    console.info(
      JSON.stringify({
        grants: figures.grants.length,
        sent: sends.length,
        asked: figures.asked,
        allowed: ideal.length,
        returned: figures.returned,
        refusedReceipts: figures.refusedReceipts,
        utilisation: utilisation.toFixed(4),
        runningUtilisation: runningUtilisation.toFixed(4),
      }),
    );
    expect(maxInAnySpan(sends, 60_000)).toBeLessThanOrEqual(50);
    expect(maxInAnySpan(sends, 3600_000)).toBeLessThanOrEqual(1000);
    expect(maxInAnySpan(kept, 60_000 + MARGIN_MS)).toBeLessThanOrEqual(50);
    expect(maxInAnySpan(kept, 3600_000 + MARGIN_MS)).toBeLessThanOrEqual(1000);
    // Demand well above what the limits allow, so that utilisation measures the ledger, not the consumers.
    expect(figures.asked).toBeGreaterThan(2 * ideal.length);
    // Give-backs by receipt were honoured (the permits came back and were granted again).
    expect(figures.returned).toBeGreaterThan(0);
    expect(figures.returned).toBeLessThanOrEqual(figures.givenBack);
    expect(utilisation).toBeGreaterThanOrEqual(0.97);
    expect(runningUtilisation).toBeGreaterThanOrEqual(0.97);
    expect(figures.unavailable).toBe(0);
  }, 600_000);

  it('holds the bound when DynamoDB loses answers of applied writes, throttles and fails, and the SDK retries', async () => {
    // Each process has its own client (its own SDK retries and retry capacity), faulted independently.
    const faulty = Array.from({ length: PROCESSES }, (_, p) =>
      createFaultyDynamoDbClient({
        endpoint: dynamo.endpoint,
        seed: SEED + p,
        lostAnswer: 0.08,
        throttle: 0.03,
        serverError: 0.03,
      }),
    );
    const figures = await run({
      dynamo,
      clients: faulty.map((f) => f.client),
      limits,
      durationMs: HOURS.faults * 3600_000,
      giveBackShare: 0.3,
      reportShare: 0.02,
      seed: SEED + 100,
    });
    for (const f of faulty) f.client.destroy();
    const injected = faulty.reduce(
      (sum, f) => ({
        sent: sum.sent + f.faults.stats.sent,
        lostAnswer: sum.lostAnswer + f.faults.stats.lostAnswer,
        throttle: sum.throttle + f.faults.stats.throttle,
        serverError: sum.serverError + f.faults.stats.serverError,
      }),
      { sent: 0, lostAnswer: 0, throttle: 0, serverError: 0 },
    );
    const sends = sendsOf(figures.grants, seededRandom(SEED + 101));
    const kept: TimedCount[] = figures.grants.map((g) => ({ time: g.grantedAt, count: g.kept }));
    console.info(
      JSON.stringify({
        ...injected,
        grants: figures.grants.length,
        sent: sends.length,
        giveBacks: figures.giveBacks,
        givenBack: figures.givenBack,
        returned: figures.returned,
        refusedReceipts: figures.refusedReceipts,
        reports: figures.reports,
        unavailable: figures.unavailable,
        maxSent60s: maxInAnySpan(sends, 60_000),
        maxSent3600s: maxInAnySpan(sends, 3600_000),
      }),
    );
    // The faults really happened, on writes that were applied and then re-sent by the SDK.
    expect(injected.lostAnswer).toBeGreaterThan(100 * FAULT_SHARE);
    expect(injected.throttle).toBeGreaterThan(20 * FAULT_SHARE);
    expect(injected.serverError).toBeGreaterThan(20 * FAULT_SHARE);
    // Thousands of operations (in test:long's 4 h): grants, give-backs and reports.
    expect(figures.grants.length + figures.reports + figures.giveBacks).toBeGreaterThan(2000 * FAULT_SHARE);
    expect(figures.returned).toBeGreaterThan(0);
    // Never more returned than given back: a give-back applied twice would show here and in the spans below.
    expect(figures.returned).toBeLessThanOrEqual(figures.givenBack);
    expect(maxInAnySpan(sends, 60_000)).toBeLessThanOrEqual(50);
    expect(maxInAnySpan(sends, 3600_000)).toBeLessThanOrEqual(1000);
    expect(maxInAnySpan(kept, 60_000 + MARGIN_MS)).toBeLessThanOrEqual(50);
    expect(maxInAnySpan(kept, 3600_000 + MARGIN_MS)).toBeLessThanOrEqual(1000);
  }, 600_000);
});
