import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { LedgerClockSkewError } from '../shared/ledger/errors.js';
import {
  ClockReference,
  DATE_LAG_MS,
  LedgerClock,
  MAX_LEDGER_CLOCK_SKEW_MS,
} from '../shared/ledger/ledger-clock.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';

/** The clock estimate alone, without an engine: answers are simulated as (sent, received, Date's second). */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const plan = planFor(rateLimitSettingsSchema.parse({})); // margin 3 s, validity 2 s: 1 s of slack

/** An answer stamped by the reference `offsetMs` ahead of `local`, `stampAfterMs` into a `rttMs` round trip. */
function answer(
  reference: ClockReference,
  sentAt: number,
  offsetMs: number,
  rttMs: number,
  stampAfterMs: number,
) {
  const stampedAt = sentAt + stampAfterMs + offsetMs;
  reference.record(sentAt, sentAt + rttMs, Math.floor(stampedAt / 1000) * 1000);
}

describe('ClockReference', () => {
  it('always holds the true offset, and narrows to about a round trip as answers cross the second', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -900_000, max: 900_000 }),
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 5_000 }),
            fc.integer({ min: 0, max: 20 }),
            fc.double({ min: 0, max: 1, noNaN: true }),
          ),
          {
            minLength: 1,
            maxLength: 200,
          },
        ),
        (offsetMs, answers) => {
          const reference = new ClockReference();
          let t = T0;
          for (const [gap, rtt, share] of answers) {
            t += gap;
            answer(reference, t, offsetMs, rtt, Math.floor(share * rtt));
            const { lo, hi } = reference.offset() ?? { lo: Number.NaN, hi: Number.NaN };
            expect(lo).toBeLessThanOrEqual(offsetMs);
            expect(hi).toBeGreaterThanOrEqual(offsetMs);
          }
        },
      ),
      { seed: 2304, numRuns: 300 },
    );
    // 200 answers spread over the second, 5 ms round trips: the round trip and the Date's allowed lag wide.
    const reference = new ClockReference();
    for (let i = 0; i < 200; i++) answer(reference, T0 + i * 1_003, 123_456, 5, 2);
    const { lo, hi } = reference.offset() as { lo: number; hi: number };
    expect(hi - lo).toBeLessThanOrEqual(5 + DATE_LAG_MS + 10);
  });

  it('starts again from the newest answer when one contradicts the others (a clock was stepped)', () => {
    const reference = new ClockReference();
    for (let i = 0; i < 50; i++) answer(reference, T0 + i * 1_013, 0, 5, 2);
    expect(reference.offset()?.lo).toBeLessThanOrEqual(0);
    // Our clock is stepped back by 5 minutes: the reference is now 5 minutes ahead of it.
    answer(reference, T0 + 60_000, 300_000, 5, 2);
    const { lo, hi } = reference.offset() as { lo: number; hi: number };
    expect(lo).toBeLessThanOrEqual(300_000);
    expect(hi).toBeGreaterThanOrEqual(300_000);
    expect(lo).toBeGreaterThan(290_000);
  });
});

/**
 * The estimate as it was first written (every answer walks the samples kept from the newest back): the queues of
 * ClockReference must find exactly what it finds, whatever the answers (out of order, contradicting, too many).
 */
class WalkingReference {
  #samples: { lo: number; hi: number; at: number }[] = [];
  #offset: { lo: number; hi: number } | undefined;

  record(sentAt: number, receivedAt: number, second: number): void {
    if (receivedAt < sentAt) return;
    this.#samples.push({ lo: second - receivedAt, hi: second + 1000 + DATE_LAG_MS - sentAt, at: receivedAt });
    let lo = Number.NEGATIVE_INFINITY;
    let hi = Number.POSITIVE_INFINITY;
    let kept = 0;
    for (let i = this.#samples.length - 1; i >= 0; i--) {
      const sample = this.#samples[i] as { lo: number; hi: number; at: number };
      if (kept === 512 || receivedAt - sample.at > 30 * 60_000) break;
      if (sample.lo > hi || sample.hi < lo) break;
      lo = Math.max(lo, sample.lo);
      hi = Math.min(hi, sample.hi);
      kept++;
    }
    this.#samples = this.#samples.slice(this.#samples.length - kept);
    this.#offset = { lo, hi };
  }

  offset() {
    return this.#offset;
  }
}

describe('ClockReference, its queues against the walk', () => {
  it('finds the interval the walk over every sample finds, answer after answer', () => {
    // Stretches of answers on one offset (long enough to pass MAX_SAMPLES and 30 minutes), then a step.
    const answerArb = fc.record({
      gapMs: fc.oneof(
        { weight: 400, arbitrary: fc.integer({ min: 0, max: 3_000 }) },
        { weight: 1, arbitrary: fc.integer({ min: -700_000, max: 2_000_000 }) },
      ),
      rttMs: fc.integer({ min: 0, max: 40 }),
      stamp: fc.double({ min: 0, max: 1, noNaN: true }),
    });
    // Round trips that grow along a stretch make its oldest answers the narrowest: dropping one shows.
    const stretchArb = fc.record({
      offsetMs: fc.oneof(fc.constant(0), fc.integer({ min: -400_000, max: 400_000 })),
      growthMs: fc.constantFrom(0, 2, 5),
      answers: fc.array(answerArb, { minLength: 1, maxLength: 900, size: 'max' }),
    });
    let most = 0;
    fc.assert(
      fc.property(fc.array(stretchArb, { minLength: 1, maxLength: 3 }), (stretches) => {
        const quick = new ClockReference();
        const walk = new WalkingReference();
        let t = T0;
        for (const { offsetMs, growthMs, answers } of stretches) {
          most = Math.max(most, answers.length);
          for (const [i, { gapMs, rttMs: base, stamp }] of answers.entries()) {
            const rttMs = base + i * growthMs;
            t += gapMs;
            const second = Math.floor((t + stamp * rttMs + offsetMs) / 1000) * 1000;
            quick.record(t, t + rttMs, second);
            walk.record(t, t + rttMs, second);
            expect(quick.offset()).toEqual(walk.offset());
          }
        }
      }),
      // A failure is shown as drawn: shrinking thousands of answers, each walked, takes minutes.
      { seed: 33, numRuns: 40, endOnFailure: true },
    );
    // Stretches longer than the samples kept were drawn (the queues dropped the oldest).
    expect(most).toBeGreaterThan(512);
  });
});

describe('LedgerClock', () => {
  const clockWith = (offsetMs: number, answers: number) => {
    const local = new ManualClock(T0 + 17);
    const reference = new ClockReference();
    for (let i = 0; i < answers; i++) answer(reference, local.now() + i * 1_009, offsetMs, 4, 1);
    const telemetry = new MemoryTelemetry();
    return { local, telemetry, clock: new LedgerClock({ local, reference, telemetry }) };
  };

  it('is the local clock without a reference, and while the reference agrees with it', () => {
    const local = new ManualClock(T0);
    const none = new LedgerClock({ local, reference: undefined, telemetry: new MemoryTelemetry() });
    expect(none.now([plan])).toBe(T0);
    const { clock, local: own } = clockWith(0, 1);
    expect(clock.now([plan])).toBe(own.now());
  });

  it('corrects a clock that is off, once the estimate is within a tenth of the slack, to within that', () => {
    const { clock, local } = clockWith(-120_000, 1);
    // One answer: a second wide, too wide to correct by.
    expect(() => clock.now([plan])).toThrow(LedgerClockSkewError);
    const narrow = clockWith(-120_000, 200);
    const time = narrow.clock.now([plan]);
    expect(Math.abs(time - (narrow.local.now() - 120_000))).toBeLessThanOrEqual(100);
    expect(narrow.telemetry.sum(Metric.LedgerClockSkewRefused)).toBe(0);
    expect(local.now()).toBe(T0 + 17);
  });

  it('refuses beyond 10 minutes either way, and counts each refusal', () => {
    for (const offsetMs of [MAX_LEDGER_CLOCK_SKEW_MS + 1_500, -MAX_LEDGER_CLOCK_SKEW_MS - 1_500]) {
      const { clock, telemetry } = clockWith(offsetMs, 200);
      for (let i = 0; i < 2; i++) {
        let refusal: unknown;
        try {
          clock.now([plan]);
        } catch (error) {
          refusal = error;
        }
        expect(refusal).toBeInstanceOf(LedgerClockSkewError);
        expect((refusal as LedgerClockSkewError).refused).toBe(true);
        expect((refusal as LedgerClockSkewError).code).toBe('LEDGER_UNAVAILABLE');
      }
      expect(telemetry.sum(Metric.LedgerClockSkewRefused)).toBe(2);
    }
    // Exactly 10 minutes is accepted.
    const { clock } = clockWith(-MAX_LEDGER_CLOCK_SKEW_MS, 200);
    expect(() => clock.now([plan])).not.toThrow();
  });

  it('gives the earliest the reference can read for purge times, never later than it', () => {
    const { clock, local } = clockWith(-120_000, 1);
    expect(clock.earliest()).toBeLessThanOrEqual(local.now() - 120_000);
    expect(clock.earliest()).toBeGreaterThan(local.now() - 120_000 - 1_100);
  });
});
