import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { LedgerClockSkewError } from '../shared/ledger/errors.js';
import { DynamoRateLedger, LedgerUnavailableError } from '../shared/ledger/index.js';
import { Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultRates } from './support/faulty-dynamodb.js';
import {
  advanceInRandomSteps,
  denied,
  granted,
  mostSendableInAnySpan,
  offsetClock,
  type SendableCount,
  seededRandom,
} from './support/ledger-harness.js';
import { itTakingTurns, propertyRuns } from './support/property-runs.js';

/**
 * Processes whose clocks disagree, on one ledger item. Time is simulated: one true clock, which DynamoDB's
 * answers carry as their `Date` (faulty-dynamodb's `date`), and each process's own clock, that true clock
 * plus its offset. What counts is what the vendor sees, on the true clock, at its worst: each permit may be
 * sent at any true moment from its answer to its ask plus the permit validity (the client counts from its ask:
 * client/permits.ts); the simulated clock also moves while requests are in flight.
 */
// 50 per 60 s (the default hour's limit left out: its waits would be the hour's), margin 3 s, validity 2 s.
/** The minute binds; the hour (never reached in these runs) keeps every grant of a run, to count them. */
const limits = rateLimitSettingsSchema.parse({
  general: [
    { limit: 50, windowSeconds: 60 },
    { limit: 5000, windowSeconds: 3600 },
  ],
});
const MINUTE = 60_000;
const MARGIN_MS = limits.marginSeconds * 1000;
const VALIDITY_MS = limits.permitValiditySeconds * 1000;
/**
 * The longest retry hint a correct process may get: the window with its margin, the last slot it may still
 * wait for (1 s), the hint spread (1 % of the window) and the largest error the skewed process's corrected time
 * may have (a tenth of the 1 s slack, ledger-clock.ts).
 */
const LONGEST_WAIT_MS = MINUTE + MARGIN_MS + 1000 + 600 + 100;
const TOKEN = 'c10c4c10c4c10c4c';
const CONSUMERS_PER_PROCESS = 2;
/** The property's runs per engine, its example (a process 10 minutes behind) first: 20 simulated minutes each. */
const RUNS = propertyRuns({ quick: 2, full: 4 });
/**
 * Simulated minutes of the two fixed skews (2 and 10 minutes ahead): `npm test` runs the first 10 of test:long's
 * 30 (the same seed, so the same consumers and clock steps up to its end).
 */
const SKEW_MINUTES = propertyRuns({ quick: 10, full: 30 });

interface Grant {
  askedAt: number;
  answeredAt: number;
  count: number;
}

interface ProcessFigures {
  offsetMs: number;
  granted: number;
  unavailable: number;
  refused: number;
  /** The longest retry hint of a denial. */
  longestWaitMs: number;
  telemetry: MemoryTelemetry;
}

/** Processes (one ledger and client each) with these clock offsets, their consumers asking for 1..5 at a time. */
async function simulate(options: {
  dynamo: LocalDynamo;
  offsets: readonly number[];
  durationMs: number;
  faults?: FaultRates;
  seed: number;
}): Promise<{ sendable: SendableCount[]; processes: ProcessFigures[]; hourCounted: number }> {
  const random = seededRandom(options.seed);
  const table = await options.dynamo.createTable('ledger-clock');
  const truth = new ManualClock();
  const processes = options.offsets.map((offsetMs, p) => {
    const faulty = createFaultyDynamoDbClient({
      endpoint: options.dynamo.endpoint,
      seed: options.seed + p,
      date: truth,
      ...options.faults,
    });
    const clock = offsetClock(truth, offsetMs);
    const telemetry = new MemoryTelemetry();
    const ledger = new DynamoRateLedger({
      client: faulty.client,
      tableName: table,
      clock,
      telemetry,
      conflictJitterMs: 2,
      reference: attachDateReference(faulty.client, clock),
    });
    const figures: ProcessFigures = {
      offsetMs,
      granted: 0,
      unavailable: 0,
      refused: 0,
      longestWaitMs: 0,
      telemetry,
    };
    return { faulty, ledger, figures };
  });
  const grants: Grant[] = [];
  let stopped = false;
  const consumer = async (p: number, caller: string) => {
    const { ledger, figures } = processes[p] as (typeof processes)[number];
    while (!stopped) {
      const count = 1 + Math.floor(random() * 5);
      const askedAt = truth.now();
      try {
        const decision = await ledger.acquire({ tokenId: TOKEN, caller, count, limits });
        if (decision.granted) {
          grants.push({ askedAt, answeredAt: truth.now(), count });
          figures.granted += count;
          await truth.sleep(Math.floor(random() * 2000));
        } else {
          figures.longestWaitMs = Math.max(figures.longestWaitMs, decision.retryAfterMs);
          await truth.sleep(decision.retryAfterMs);
        }
      } catch (error) {
        if (!(error instanceof LedgerUnavailableError)) throw error;
        figures.unavailable++;
        if (error instanceof LedgerClockSkewError && error.refused) figures.refused++;
        await truth.sleep(100 + Math.floor(random() * 900));
      }
    }
  };
  const consumers = processes.flatMap((_, p) =>
    Array.from({ length: CONSUMERS_PER_PROCESS }, (_, c) => consumer(p, `consumer-${p}-${c}`)),
  );
  await advanceInRandomSteps(truth, consumers.length, truth.now() + options.durationMs, random);
  stopped = true;
  // Every consumer wakes and stops (none asks again), then what the ledger counts in the hour (the whole run) is
  // read by a correct process without faults: to compare with what was granted (no grant counted twice).
  await truth.advance(2 * MINUTE);
  const readerClient = createDynamoDbClient({ endpoint: options.dynamo.endpoint });
  const reader = new DynamoRateLedger({ client: readerClient, tableName: table, clock: truth });
  const hourCounted = (await reader.usage(TOKEN, limits)).windows[1]?.used ?? Number.NaN;
  readerClient.destroy();
  await truth.advance(3600_000);
  await Promise.all(consumers);
  for (const { faulty } of processes) faulty.client.destroy();
  // A permit that arrives after its validity is over is never sent.
  const sendable = grants
    .filter((g) => g.answeredAt <= g.askedAt + VALIDITY_MS)
    .map((g) => ({ from: g.answeredAt, to: g.askedAt + VALIDITY_MS, count: g.count }));
  return { sendable, processes: processes.map((p) => p.figures), hourCounted };
}

// Timeouts bound a hang: a simulated half hour takes a few seconds idle, much more on a loaded machine.
describe.each(ENGINES)("rate ledger with a process clock off DynamoDB's on %s", (engine) => {
  const it = itTakingTurns(engine, ENGINES, {
    'a process 2 minutes ahead': 0,
    'a process 10 minutes ahead': 1,
    'property:': 1,
  });
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it('a process 2 minutes ahead among correct ones: never more than 50 sent in any minute', async () => {
    const { sendable, processes } = await simulate({
      dynamo,
      offsets: [0, 0, 0, 2 * MINUTE],
      durationMs: SKEW_MINUTES * MINUTE,
      seed: 2301,
    });
    console.info(JSON.stringify(processes.map(({ telemetry: _, ...figures }) => figures)));
    expect(mostSendableInAnySpan(sendable, MINUTE)).toBeLessThanOrEqual(50);
    // Served, not refused: its time is corrected once DynamoDB's clock is known closely enough.
    const skewed = processes[3] as ProcessFigures;
    expect(skewed.granted).toBeGreaterThan(0);
    expect(skewed.refused).toBe(0);
  }, 300_000);

  it('a process 10 minutes ahead: the bound holds and correct processes never wait longer than the window', async () => {
    const { sendable, processes } = await simulate({
      dynamo,
      offsets: [0, 0, 10 * MINUTE],
      durationMs: SKEW_MINUTES * MINUTE,
      seed: 2302,
    });
    console.info(JSON.stringify(processes.map(({ telemetry: _, ...figures }) => figures)));
    expect(mostSendableInAnySpan(sendable, MINUTE)).toBeLessThanOrEqual(50);
    const [first, second, skewed] = processes as [ProcessFigures, ProcessFigures, ProcessFigures];
    // Demand beyond the limit: correct processes were told to wait, and never longer than the window.
    expect(Math.max(first.longestWaitMs, second.longestWaitMs)).toBeGreaterThan(0);
    expect(first.longestWaitMs).toBeLessThanOrEqual(LONGEST_WAIT_MS);
    expect(second.longestWaitMs).toBeLessThanOrEqual(LONGEST_WAIT_MS);
    expect(skewed.granted).toBeGreaterThan(0);
    expect(skewed.refused).toBe(0);
  }, 300_000);

  it('refuses a process 11 minutes off (either way), counts it, and serves the correct one beside it', async () => {
    for (const offsetMs of [11 * MINUTE, -11 * MINUTE]) {
      const table = await dynamo.createTable('ledger-clock-refused');
      const truth = new ManualClock();
      const processOf = (offset: number) => {
        const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, date: truth });
        const clock = offsetClock(truth, offset);
        const telemetry = new MemoryTelemetry();
        const reference = attachDateReference(faulty.client, clock);
        const ledger = new DynamoRateLedger({
          client: faulty.client,
          tableName: table,
          clock,
          telemetry,
          random: () => 0,
          reference,
        });
        return { client: faulty.client, ledger, telemetry };
      };
      const correct = processOf(0);
      const skewed = processOf(offsetMs);
      const ask = (ledger: DynamoRateLedger, count: number) =>
        ledger.acquire({ tokenId: TOKEN, caller: 'consumer', count, limits });

      granted(await ask(correct.ledger, 20));
      for (let attempt = 0; attempt < 3; attempt++) {
        const refusal = await ask(skewed.ledger, 5).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(refusal).toBeInstanceOf(LedgerClockSkewError);
        expect(refusal).toBeInstanceOf(LedgerUnavailableError);
        expect((refusal as LedgerClockSkewError).refused).toBe(true);
        expect((refusal as Error).message).toMatch(
          new RegExp(`clock is 6(5\\d|60)(\\.\\d)? s ${offsetMs > 0 ? 'ahead of' : 'behind'} DynamoDB's`),
        );
        await truth.advance(1500);
      }
      // Counted, once per refused decision, through the ledger's telemetry.
      expect(skewed.telemetry.sum(Metric.LedgerClockSkewRefused)).toBe(3);
      expect(correct.telemetry.sum(Metric.LedgerClockSkewRefused)).toBe(0);
      // It granted nothing: the correct process still has 30 of the minute's 50, then waits at most the window.
      granted(await ask(correct.ledger, 30));
      const denial = denied(await ask(correct.ledger, 1));
      expect(denial.retryAfterMs).toBeLessThanOrEqual(LONGEST_WAIT_MS);
      correct.client.destroy();
      skewed.client.destroy();
    }
  }, 60_000);

  it('property: one process of four with a random skew of up to 10 minutes, DynamoDB faults: no excess in any span, no grant counted twice', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: -10 * MINUTE, max: 10 * MINUTE }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        async (skewMs, skewedIndex, seed) => {
          runs++;
          const offsets = [0, 0, 0, 0].map((_, p) => (p === skewedIndex ? skewMs : 0));
          const { sendable, processes, hourCounted } = await simulate({
            dynamo,
            offsets,
            durationMs: 20 * MINUTE,
            faults: { lostAnswer: 0.08, throttle: 0.03, serverError: 0.03 },
            seed,
          });
          expect(mostSendableInAnySpan(sendable, MINUTE)).toBeLessThanOrEqual(50);
          // No grant counted twice: the hour holds what was granted, plus at most what calls that failed closed
          // (no answer, even after the re-read) may have applied once (5 each at most).
          const granted = processes.reduce((sum, figures) => sum + figures.granted, 0);
          const failedClosed = processes.reduce((sum, figures) => sum + figures.unavailable, 0);
          expect(hourCounted).toBeGreaterThanOrEqual(granted);
          expect(hourCounted).toBeLessThanOrEqual(granted + 5 * failedClosed);
          for (const [p, figures] of processes.entries()) {
            expect(figures.refused).toBe(0);
            if (p !== skewedIndex) expect(figures.longestWaitMs).toBeLessThanOrEqual(LONGEST_WAIT_MS);
          }
          // The limit was reached: the bound was tested, not idle.
          expect(mostSendableInAnySpan(sendable, MINUTE)).toBeGreaterThanOrEqual(45);
        },
      ),
      // A process 10 minutes behind, besides the random ones (the seed's happen to be ahead or near zero).
      { numRuns: RUNS, seed: 2303, endOnFailure: true, examples: [[-10 * MINUTE, 2, 2305]] },
    );
    expect(runs).toBeGreaterThanOrEqual(RUNS);
  }, 600_000);
});
