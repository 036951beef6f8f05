import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { ConfigurationError } from '../shared/errors.js';
import {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  ReceiptRejectedError,
  UnknownPermitClassError,
} from '../shared/ledger/errors.js';
import { acquire, emptyState, stateAt } from '../shared/ledger/ledger-state.js';
import { largestGrant, planFor } from '../shared/ledger/limit-plan.js';
import { checkPermit } from '../shared/ledger/operations/index.js';
import { checkFeedback, checkGiveBack } from '../shared/ledger/validation.js';
import { LedgerCore } from './support/ledger-core.js';
import { maxInAnySpan, type TimedCount } from './support/ledger-harness.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const settings = (input: Partial<RateLimitSettings> = {}): RateLimitSettings =>
  rateLimitSettingsSchema.parse(input);

describe('rate ledger core: limits and windows', () => {
  it('grants up to the limit in one go, then denies for quota with a wait > 0', () => {
    const core = new LedgerCore(settings());
    const first = core.acquire(T0, 50);
    expect(first).toMatchObject({
      granted: true,
      count: 50,
      grantedAt: T0,
      validUntil: T0 + core.plan.validityMs,
    });
    const denied = core.acquire(T0 + 10_000, 1);
    expect(denied.granted).toBe(false);
    if (denied.granted) return;
    expect(denied.reason).toBe('QUOTA');
    expect(denied.retryAt).toBeGreaterThan(T0 + 10_000);
    expect(denied.remaining).toContainEqual({ limit: 50, windowSeconds: 60, remaining: 0 });
  });

  it('keeps a grant counted for the window plus the margin, and frees it right after', () => {
    const core = new LedgerCore(settings({ marginSeconds: 5 }));
    core.acquire(T0, 50);
    const denied = core.acquire(T0 + 65_000, 1);
    expect(denied.granted).toBe(false);
    if (denied.granted) return;
    // Freed once the slot's last grant (in its first 1/36 of a second) is 65 s old: within 28 ms of the ideal.
    expect(denied.retryAt).toBeGreaterThan(T0 + 65_000);
    expect(denied.retryAt).toBeLessThanOrEqual(T0 + 65_000 + 28);
    expect(core.probe(denied.retryAt - 1, 1).granted).toBe(false);
    expect(core.probe(denied.retryAt, 50).granted).toBe(true);
  });

  it('counts the hour too: 1000 per 3600 s holds even when the minute has room', () => {
    const core = new LedgerCore(settings({ marginSeconds: 5 }));
    let granted = 0;
    let g = T0;
    while (granted < 1000) {
      const outcome = core.acquire(g, 50);
      if (!outcome.granted) throw new Error('expected the minute to have room');
      granted += 50;
      g += 66_000;
    }
    const denied = core.acquire(g, 1);
    expect(denied).toMatchObject({ granted: false, reason: 'QUOTA' });
    if (denied.granted) return;
    expect(denied.retryAt).toBeGreaterThan(T0 + 3_605_000);
    expect(denied.retryAt).toBeLessThanOrEqual(T0 + 3_605_000 + 1_667);
    expect(core.remaining(g)).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 50 },
      { limit: 1000, windowSeconds: 3600, remaining: 0 },
    ]);
  });

  it('scales its slots with compressed windows (50 per 6 s: slots of 100 ms)', () => {
    const limits = settings({
      general: [
        { limit: 50, windowSeconds: 6 },
        { limit: 1000, windowSeconds: 360 },
      ],
      marginSeconds: 0.5,
      permitValiditySeconds: 0.3,
    });
    expect(planFor(limits).general.map((spec) => [spec.slotMs, spec.length])).toEqual([
      [100, 66],
      [6000, 62],
    ]);
    const core = new LedgerCore(limits);
    core.acquire(T0 + 50, 50);
    const denied = core.acquire(T0 + 1000, 1);
    if (denied.granted) throw new Error('expected a denial');
    expect(denied.retryAt).toBeGreaterThan(T0 + 6_550);
    expect(denied.retryAt).toBeLessThanOrEqual(T0 + 6_550 + 3);
  });

  it('a class permit counts against its class and the general limits; a general one only against the general', () => {
    const limits = settings({ classes: { reports: [{ limit: 5, windowSeconds: 60 }] } });
    const core = new LedgerCore(limits);
    expect(core.acquire(T0, 5, 'reports').granted).toBe(true);
    expect(core.acquire(T0, 1, 'reports')).toMatchObject({ granted: false, reason: 'QUOTA' });
    expect(core.acquire(T0, 45).granted).toBe(true);
    expect(core.acquire(T0, 1)).toMatchObject({ granted: false, reason: 'QUOTA' });
    expect(core.remaining(T0, 'reports')).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 0 },
      { limit: 1000, windowSeconds: 3600, remaining: 950 },
      { limit: 5, windowSeconds: 60, remaining: 0, class: 'reports' },
    ]);
  });

  it('never lets the ledger clock run backwards: a caller behind the last write is served at the newer time', () => {
    const core = new LedgerCore(settings());
    core.acquire(T0 + 10_000, 1);
    const late = core.acquire(T0, 1);
    expect(late).toMatchObject({ granted: true, grantedAt: T0 + 10_000 });
  });
});

describe('rate ledger core: properties', () => {
  const limitArb = fc.record({
    limit: fc.integer({ min: 1, max: 60 }),
    windowSeconds: fc.integer({ min: 1, max: 120 }),
  });
  const settingsArb = fc
    .record({
      general: fc.array(limitArb, { minLength: 1, maxLength: 2 }),
      classLimits: fc.array(limitArb, { minLength: 1, maxLength: 2 }),
      marginMs: fc.integer({ min: 0, max: 10_000 }),
      validityFraction: fc.double({ min: 0.01, max: 0.8, noNaN: true }),
    })
    .filter((s) => s.marginMs >= 10)
    .map((s) =>
      rateLimitSettingsSchema.safeParse({
        general: s.general,
        classes: { heavy: s.classLimits },
        marginSeconds: s.marginMs / 1000,
        permitValiditySeconds: Math.max(0.001, Math.floor(s.marginMs * s.validityFraction) / 1000),
      }),
    )
    // Only limits the configuration accepts (the ledger item must stay within one write unit).
    .filter((parsed) => parsed.success)
    .map((parsed) => parsed.data as RateLimitSettings);
  const stepsArb = fc.array(
    fc.record({
      dt: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 40_000 })),
      k: fc.integer({ min: 1, max: 5 }),
      heavy: fc.boolean(),
    }),
    { minLength: 50, maxLength: 400 },
  );

  it('never exceeds any limit in any span, wherever in their validity the permits are sent', () => {
    fc.assert(
      fc.property(settingsArb, stepsArb, (limits, steps) => {
        const core = new LedgerCore(limits);
        const plan = core.plan;
        const general: TimedCount[] = [];
        const heavy: TimedCount[] = [];
        let g = T0;
        for (const step of steps) {
          g += step.dt;
          const cls = step.heavy ? 'heavy' : undefined;
          const k = Math.min(
            step.k,
            ...[...plan.general, ...(cls ? (plan.classes.get(cls) ?? []) : [])].map((s) => s.limit),
          );
          const outcome = core.acquire(g, k, cls);
          if (!outcome.granted) continue;
          general.push({ time: outcome.grantedAt, count: k });
          if (cls) heavy.push({ time: outcome.grantedAt, count: k });
        }
        // Sends anywhere in [g, g + V] put at worst every grant of a span of W + V inside one W; the ledger
        // promises more: no closed span of W + D (D ≥ V) holds more than the limit.
        for (const spec of plan.general)
          expect(maxInAnySpan(general, spec.spanMs)).toBeLessThanOrEqual(spec.limit);
        for (const spec of plan.classes.get('heavy') ?? [])
          expect(maxInAnySpan(heavy, spec.spanMs)).toBeLessThanOrEqual(spec.limit);
      }),
      { numRuns: 150 },
    );
  });

  it('never exceeds the limit in any span while the reservations change under busy consumers', () => {
    const reservationsArb = fc.array(
      fc.record({ consumer: fc.constantFrom('a', 'b', 'c'), reserved: fc.integer({ min: 1, max: 9 }) }),
      { maxLength: 2 },
    );
    const configsArb = fc.array(reservationsArb, { minLength: 2, maxLength: 4 }).map((configs) =>
      configs.map((reservations) =>
        settings({
          general: [{ limit: 20, windowSeconds: 10 }],
          marginSeconds: 1,
          permitValiditySeconds: 0.5,
          reservations: [...new Map(reservations.map((r) => [r.consumer, r])).values()].map((r) => ({
            consumer: r.consumer,
            perWindow: { 10: r.reserved },
          })),
        }),
      ),
    );
    const changingArb = fc.array(
      fc.record({
        dt: fc.integer({ min: 0, max: 1500 }),
        k: fc.integer({ min: 1, max: 4 }),
        consumer: fc.constantFrom('a', 'b', 'c', undefined),
        config: fc.nat(),
      }),
      { minLength: 50, maxLength: 400 },
    );
    fc.assert(
      fc.property(configsArb, changingArb, (configs, steps) => {
        let state = emptyState();
        const grants: TimedCount[] = [];
        let g = T0;
        let config = 0;
        for (const [i, step] of steps.entries()) {
          // Every 40 steps another configuration (a deploy), used by everyone from then on.
          if (i % 40 === 39) config = step.config % configs.length;
          const plan = planFor(configs[config] as RateLimitSettings);
          g += step.dt;
          state = stateAt(state, Math.max(g, state.time), plan.marginMs);
          const k = Math.min(step.k, largestGrant(plan, undefined, step.consumer));
          const outcome = acquire(state, plan, state.time, k, undefined, step.consumer);
          if (outcome.granted) grants.push({ time: outcome.grantedAt, count: k });
        }
        // 20 per 10 s, counted over 11 s (the margin).
        expect(maxInAnySpan(grants, 11_000)).toBeLessThanOrEqual(20);
      }),
      { numRuns: 200 },
    );
  });

  it('says exactly when to come back: denied 1 ms before retryAt, granted at it (lone consumer)', () => {
    fc.assert(
      fc.property(settingsArb, stepsArb, (limits, steps) => {
        const core = new LedgerCore(limits);
        let g = T0;
        let denials = 0;
        for (const step of steps) {
          g += step.dt;
          const cls = step.heavy ? 'heavy' : undefined;
          const max = Math.min(
            ...[...core.plan.general, ...(core.plan.classes.get('heavy') ?? [])].map((s) => s.limit),
          );
          const k = Math.min(step.k, max);
          const outcome = core.acquire(g, k, cls);
          if (outcome.granted) continue;
          denials++;
          expect(outcome.retryAt).toBeGreaterThan(g);
          expect(core.probe(outcome.retryAt - 1, k, cls).granted).toBe(false);
          expect(core.probe(outcome.retryAt, k, cls).granted).toBe(true);
        }
        return denials >= 0;
      }),
      { numRuns: 150 },
    );
  });
});

describe('rate ledger core: give back', () => {
  it('returns permits to the slot they were granted in, so they can be granted again', () => {
    const core = new LedgerCore(settings());
    const grant = core.acquire(T0, 50);
    if (!grant.granted) throw new Error('expected a grant');
    expect(core.acquire(T0 + 1000, 1).granted).toBe(false);
    expect(core.giveBack(T0 + 1000, 20, grant.grantedAt)).toBe(true);
    expect(core.acquire(T0 + 1000, 20).granted).toBe(true);
    expect(core.acquire(T0 + 1000, 1).granted).toBe(false);
  });

  it('never goes below zero, and ignores slots that have aged out or lie in the future', () => {
    const core = new LedgerCore(settings());
    const grant = core.acquire(T0, 3);
    if (!grant.granted) throw new Error('expected a grant');
    expect(core.giveBack(T0, 10, grant.grantedAt)).toBe(true);
    expect(core.remaining(T0)).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 50 },
      { limit: 1000, windowSeconds: 3600, remaining: 1000 },
    ]);
    expect(core.giveBack(T0, 1, grant.grantedAt)).toBe(false);
    expect(core.giveBack(T0, 1, T0 + 60_000)).toBe(false);
    core.acquire(T0 + 1000, 2);
    expect(core.giveBack(T0 + 7_300_000, 2, T0 + 1000)).toBe(false);
  });
});

describe('rate ledger core: vendor feedback', () => {
  it('a 429 Retry-After denies everyone until it passes, and only ever lengthens', () => {
    const core = new LedgerCore(settings());
    expect(core.feedback(T0, { retryAfterSeconds: 30 })).toBe(true);
    expect(core.feedback(T0 + 1000, { retryAfterSeconds: 5 })).toBe(false);
    const denied = core.acquire(T0 + 2000, 1);
    expect(denied).toMatchObject({ granted: false, reason: 'COOLDOWN', retryAt: T0 + 30_000 });
    expect(core.remaining(T0 + 2000).every((entry) => entry.remaining === 0)).toBe(true);
    expect(core.acquire(T0 + 30_000, 1).granted).toBe(true);
  });

  it('X-RateLimit-Remaining/-Reset cap the grants until the reset, counting the grants since the report', () => {
    const core = new LedgerCore(settings());
    const reset = Math.floor((T0 + 40_000) / 1000);
    expect(core.feedback(T0, { limit: 50, remaining: 4, reset })).toBe(true);
    expect(core.acquire(T0 + 1, 3).granted).toBe(true);
    const denied = core.acquire(T0 + 2, 2);
    expect(denied).toMatchObject({ granted: false, reason: 'VENDOR_CAP', retryAt: reset * 1000 });
    expect(core.acquire(T0 + 3, 1).granted).toBe(true);
    expect(core.acquire(T0 + 4, 1)).toMatchObject({ granted: false, reason: 'VENDOR_CAP' });
    expect(core.acquire(reset * 1000, 2).granted).toBe(true);
  });

  it('a cap only tightens: a looser report, or one the rings already enforce, changes nothing', () => {
    const core = new LedgerCore(settings());
    const reset = Math.floor((T0 + 40_000) / 1000);
    expect(core.feedback(T0, { limit: 50, remaining: 10, reset })).toBe(true);
    expect(core.feedback(T0, { limit: 50, remaining: 30, reset })).toBe(false);
    expect(core.feedback(T0, { limit: 50, remaining: 10, reset: reset - 5 })).toBe(false);
    expect(core.state.caps).toEqual([{ scope: '*', remaining: 10, until: reset * 1000, windowMs: 60_000 }]);
    const fresh = new LedgerCore(settings());
    fresh.acquire(T0, 45);
    // The minute ring already allows only 5 more until well after the reset.
    expect(fresh.feedback(T0 + 1000, { limit: 50, remaining: 5, reset })).toBe(false);
    expect(fresh.feedback(T0 + 1000, { limit: 50, remaining: 2, reset })).toBe(true);
  });

  it("the hour's remaining count tightens the ledger even while 50 or more are left (the minute's limit)", () => {
    const core = new LedgerCore(settings());
    expect(core.acquire(T0, 40).granted).toBe(true);
    // The vendor says 60 are left of its hour until half an hour from now; the ledger believes 960.
    const reset = Math.floor((T0 + 1800_000) / 1000);
    expect(core.feedback(T0 + 1000, { limit: 1000, remaining: 60, reset })).toBe(true);
    expect(core.acquire(T0 + 70_000, 50).granted).toBe(true);
    expect(core.acquire(T0 + 140_000, 10).granted).toBe(true);
    expect(core.acquire(T0 + 210_000, 1)).toMatchObject({
      granted: false,
      reason: 'VENDOR_CAP',
      retryAt: reset * 1000,
    });
  });

  it('a report naming a class limit caps only that class', () => {
    const core = new LedgerCore(settings({ classes: { reports: [{ limit: 7, windowSeconds: 60 }] } }));
    const reset = Math.floor((T0 + 30_000) / 1000);
    expect(core.feedback(T0, { limit: 7, remaining: 1, reset })).toBe(true);
    expect(core.acquire(T0, 1, 'reports').granted).toBe(true);
    expect(core.acquire(T0, 1, 'reports')).toMatchObject({ granted: false, reason: 'VENDOR_CAP' });
    expect(core.acquire(T0, 10).granted).toBe(true);
  });

  it("a reset in the past is ignored; a reset beyond the named limit's window is shortened to it", () => {
    const core = new LedgerCore(settings());
    expect(core.feedback(T0, { remaining: 0, reset: Math.floor(T0 / 1000) - 1 })).toBe(false);
    expect(core.feedback(T0, { limit: 1000, remaining: 0, reset: Math.floor(T0 / 1000) + 86_400 })).toBe(
      true,
    );
    expect(core.state.caps[0]?.until).toBe(T0 + 3600_000 + core.plan.marginMs);
    // No limit named (or one the settings do not know): the shortest window is all it warrants.
    const unnamed = new LedgerCore(settings());
    expect(unnamed.feedback(T0, { remaining: 0, reset: Math.floor(T0 / 1000) + 86_400 })).toBe(true);
    expect(unnamed.state.caps[0]?.until).toBe(T0 + 60_000 + core.plan.marginMs);
  });
});

describe('rate ledger core: input checks', () => {
  const limits = settings({ classes: { reports: [{ limit: 5, windowSeconds: 60 }] } });
  it.each([0, -1, 1.5, 51, Number.NaN, '3', undefined])('refuses count %s', (count) => {
    expect(() => checkPermit({ tokenId: 'abc', count, limits })).toThrow(InvalidPermitCountError);
  });
  it('refuses a count above the class limit, and an unknown class, with stable codes', () => {
    expect(() => checkPermit({ tokenId: 'abc', count: 6, class: 'reports', limits })).toThrow(
      expect.objectContaining({ code: 'INVALID_PERMIT_COUNT' }),
    );
    expect(() => checkPermit({ tokenId: 'abc', count: 1, class: 'rebalancing', limits })).toThrow(
      UnknownPermitClassError,
    );
    expect(() => checkPermit({ tokenId: 'abc', count: 1, class: 'toString', limits })).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_PERMIT_CLASS' }),
    );
  });
  it('refuses a token id that is not an id (a raw token) without echoing it', () => {
    const jwtLike = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1YXQtYWR2aXNvciJ9.c2lnbmF0dXJlLXNlY3JldA';
    let error: unknown;
    try {
      checkPermit({ tokenId: jwtLike, count: 1, limits });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(InvalidLedgerRequestError);
    expect(JSON.stringify({ ...(error as object), message: (error as Error).message })).not.toContain('eyJ');
  });
  it('refuses malformed give-backs and vendor feedback', () => {
    expect(() => checkGiveBack({ tokenId: 'abc', count: 1, receipt: 'r1.abc', limits })).toThrow(
      ReceiptRejectedError,
    );
    expect(() => checkFeedback({ tokenId: 'abc', limits, retryAfterSeconds: -1 })).toThrow(
      InvalidLedgerRequestError,
    );
    expect(() => checkFeedback({ tokenId: 'abc', limits, retryAfterSeconds: 1e9 })).toThrow(
      InvalidLedgerRequestError,
    );
    expect(() => checkFeedback({ tokenId: 'abc', limits, remaining: 2.5 })).toThrow(
      InvalidLedgerRequestError,
    );
    expect(
      checkFeedback({ tokenId: 'abc', limits, limit: 50, remaining: 3, reset: 1_800_000_000 }).feedback,
    ).toEqual({
      limit: 50,
      remaining: 3,
      reset: 1_800_000_000,
    });
  });
  it('refuses settings whose permits outlive the margin (the bound would not hold)', () => {
    expect(() => settings({ marginSeconds: 1, permitValiditySeconds: 2 })).toThrow(
      /at least 20 % of marginSeconds/,
    );
    expect(() => settings({ marginSeconds: 5, permitValiditySeconds: 5 })).toThrow(/slack/);
    expect(settings({ marginSeconds: 5, permitValiditySeconds: 4 }).permitValiditySeconds).toBe(4);
    // Straight to the ledger, bypassing the schema: the same refusal.
    expect(() => planFor({ ...settings(), permitValiditySeconds: 5 })).toThrow(ConfigurationError);
  });

  it('I3: bounds the classes so that the ledger item stays within one write unit, and says so', () => {
    const reports = [{ limit: 10, windowSeconds: 60 }];
    const rebalancing = [{ limit: 20, windowSeconds: 3600 }];
    // The general limits alone fit item format 1 (which the previous release reads): it is kept for them.
    expect(planFor(settings()).itemFormat).toBe(1);
    expect(planFor(settings()).itemBytesBound).toBeLessThanOrEqual(1024);
    // Settings the previous release accepted (one small class) keep format 1, which it reads, though their
    // item as it is now counted may take two write units; format 2 holds them in one.
    const one = planFor(settings({ classes: { reports } }));
    expect(one.itemFormat).toBe(1);
    expect(one.itemBytesBound).toBeGreaterThan(1024);
    expect(planFor(settings({ itemFormat: 2, classes: { reports } })).itemBytesBound).toBeLessThanOrEqual(
      1024,
    );
    // Classes fit one write unit only packed: unset, the format is 2 (was: reports + rebalancing refused).
    const both = planFor(settings({ classes: { reports, rebalancing } }));
    expect(both.itemFormat).toBe(2);
    expect(both.itemBytesBound).toBeLessThanOrEqual(1024);
    const hourly = [
      { limit: 25, windowSeconds: 60 },
      { limit: 500, windowSeconds: 3600 },
    ];
    const four = { reports: hourly, rebalancing: hourly, exports: hourly, 'bulk-orders': hourly };
    expect(planFor(settings({ classes: four })).itemBytesBound).toBeLessThanOrEqual(1024);
    // Asked for format 1 where it cannot fit: refused, naming the way out.
    expect(() => settings({ itemFormat: 1, classes: { reports, rebalancing } })).toThrow(
      /over one write unit \(1024\); item format 2 would take \d+/,
    );
    // Beyond what even format 2 can hold: refused.
    const manyWindows = [1, 10, 60, 600, 3600, 86_400].map((w) => ({ limit: 25 * w, windowSeconds: w }));
    expect(() => settings({ classes: { ...four, reports: manyWindows, exports: manyWindows } })).toThrow(
      /over one write unit \(1024\): use fewer classes or windows/,
    );
    const five = Object.fromEntries(
      ['a', 'b', 'c', 'd', 'e'].map((name) => [name, [{ limit: 1, windowSeconds: 1 }]]),
    );
    expect(() => settings({ classes: five })).toThrow(/at most 4 classes/);
  });
});
