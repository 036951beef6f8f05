import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, LedgerUnavailableError } from '../shared/ledger/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { idealGrantTimes, maxInAnySpan, seededRandom, type TimedCount } from './support/ledger-harness.js';

/**
 * The property, against dynalite: 20 consumers in 10 processes (10 ledger instances: separate caches,
 * racing conditional writes) ask for 1..5 permits at a time while a random clock moves over 3.5 simulated hours.
 */
const limits = rateLimitSettingsSchema.parse({}); // 50 per 60 s, 1000 per 3600 s, margin 5 s, validity 3 s
const PROCESSES = 10;
const CONSUMERS_PER_PROCESS = 2;
const DURATION_MS = 3.5 * 3600_000;
const TOKEN = 'a1b2c3d4e5f60718';
const SEED = Number(process.env.LEDGER_PROPERTY_SEED ?? 20260105);

interface Grant {
  grantedAt: number;
  validUntil: number;
  /** Permits kept (granted minus given back). */
  kept: number;
}

describe('rate ledger property: concurrent consumers over simulated hours', () => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it('never exceeds 50 in any 60 s or 1000 in any 3600 s of sends, and uses ≥ 97 % of what the limits allow', async () => {
    const random = seededRandom(SEED);
    const table = await dynamo.createTable('ledger-property');
    const clock = new ManualClock();
    const start = clock.now();
    const end = start + DURATION_MS;
    const ledgers = Array.from(
      { length: PROCESSES },
      () => new DynamoRateLedger({ client: dynamo.client, tableName: table, clock }),
    );
    const grants: Grant[] = [];
    let asked = 0;
    let denials = 0;
    let unavailable = 0;
    let stopped = false;

    const consumer = async (ledger: DynamoRateLedger) => {
      while (!stopped) {
        const count = 1 + Math.floor(random() * 5);
        asked += count;
        try {
          const decision = await ledger.acquire({ tokenId: TOKEN, count, limits });
          if (!decision.granted) {
            denials++;
            await clock.sleep(decision.retryAfterMs);
            continue;
          }
          const grant: Grant = {
            grantedAt: decision.grantedAt,
            validUntil: decision.validUntil,
            kept: count,
          };
          grants.push(grant);
          if (random() < 0.1) {
            const back = 1 + Math.floor(random() * count);
            await ledger.giveBack({ tokenId: TOKEN, count: back, grantedAt: decision.grantedAt, limits });
            grant.kept -= back;
          }
          await clock.sleep(Math.floor(random() * 2000));
        } catch (error) {
          if (!(error instanceof LedgerUnavailableError)) throw error;
          unavailable++;
          await clock.sleep(100 + Math.floor(random() * 900));
        }
      }
    };
    const consumers = ledgers.flatMap((ledger) =>
      Array.from({ length: CONSUMERS_PER_PROCESS }, () => consumer(ledger)),
    );
    const everyoneWaiting = async () => {
      while (clock.pendingSleepers < consumers.length) await new Promise((r) => setImmediate(r));
    };

    const started = performance.now();
    while (clock.now() < end) {
      await everyoneWaiting();
      // Mostly under a second, sometimes up to 10 s; the clock also moves while requests are in flight.
      const step = random() < 0.98 ? random() * 1000 : 1000 + random() * 9000;
      await clock.advance(Math.max(1, Math.floor(Math.min(step, end - clock.now()))));
    }
    await everyoneWaiting();
    stopped = true;
    await clock.advance(4 * 3600_000);
    await Promise.all(consumers);
    const wallSeconds = (performance.now() - started) / 1000;

    // Each kept permit is sent at a random moment of its validity: what the vendor would see.
    const sends: TimedCount[] = grants.flatMap((g) =>
      Array.from({ length: g.kept }, () => ({
        time: g.grantedAt + Math.floor(random() * (g.validUntil - g.grantedAt + 1)),
        count: 1,
      })),
    );
    const kept: TimedCount[] = grants.map((g) => ({ time: g.grantedAt, count: g.kept }));
    const sent = sends.length;
    const figures = {
      grants: grants.length,
      sent,
      asked,
      denials,
      unavailable,
      maxSent60s: maxInAnySpan(sends, 60_000),
      maxSent3600s: maxInAnySpan(sends, 3600_000),
      maxGranted65s: maxInAnySpan(kept, 65_000),
      maxGranted3605s: maxInAnySpan(kept, 3605_000),
    };

    // "Allow": the most ANY scheduler could have let through over the same run under the vendor's own limits
    // (exact sliding windows, no margin): the greedy schedule, optimal for every prefix (see idealGrantTimes).
    const vendorLimits = [
      { limit: 50, windowMs: 60_000 },
      { limit: 1000, windowMs: 3600_000 },
    ];
    const ideal = idealGrantTimes(vendorLimits, start, end);
    const keptBy = (t: number) => kept.reduce((sum, k) => sum + (k.time <= t ? k.count : 0), 0);
    const idealBy = (times: number[], t: number) => times.filter((time) => time <= t).length;
    // Over the run as it goes, not only at its end: the ledger's lag (margin, slot rounding, the clock moving
    // while requests are in flight) shows as a shortfall in the middle of a burst phase. Averaged over every
    // minute after the first hour, and the worst minute for information.
    let sum = 0;
    let samples = 0;
    let worstMinute = 1;
    for (let t = start + 3600_000; t <= end; t += 60_000) {
      const ratio = keptBy(t) / idealBy(ideal, t);
      sum += ratio;
      samples++;
      worstMinute = Math.min(worstMinute, ratio);
    }
    const runningUtilisation = sum / samples;
    const utilisation = sent / ideal.length;
    console.info(
      JSON.stringify({
        ...figures,
        allowed: ideal.length,
        utilisation: utilisation.toFixed(4),
        runningUtilisation: runningUtilisation.toFixed(4),
        worstMinute: worstMinute.toFixed(4),
        wallSeconds: wallSeconds.toFixed(1),
      }),
    );

    expect(figures.maxSent60s).toBeLessThanOrEqual(50);
    expect(figures.maxSent3600s).toBeLessThanOrEqual(1000);
    expect(figures.maxGranted65s).toBeLessThanOrEqual(50);
    expect(figures.maxGranted3605s).toBeLessThanOrEqual(1000);
    expect(asked).toBeGreaterThan(3 * ideal.length);
    expect(utilisation).toBeGreaterThanOrEqual(0.97);
    expect(runningUtilisation).toBeGreaterThanOrEqual(0.97);
    expect(unavailable).toBe(0);
  }, 120_000);
});
