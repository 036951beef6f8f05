import { type DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { planIn } from '../shared/ledger/learned-reports.js';
import type { LearnedView } from '../shared/ledger/learned-store.js';
import { acquire, emptyState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { callerTag } from '../shared/ledger/receipts.js';
import { applyVendorFeedback, type VendorFeedback } from '../shared/ledger/vendor-feedback.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { LedgerCore } from './support/ledger-core.js';
import { denied, granted } from './support/ledger-harness.js';

/**
 * Vendor feedback (issue 23, points 4 and 5): one cap per limit, expiring at its own reset, never merged into a
 * longer-lived one; and one caller's Retry-After holds the set no longer than the limit it names warrants.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const defaults: RateLimitSettings = rateLimitSettingsSchema.parse({}); // 50/60 s, 1000/3600 s, margin 3 s
const reserved: RateLimitSettings = rateLimitSettingsSchema.parse({
  reservations: [{ consumer: 'order-service', perWindow: { 60: 20 } }],
});
const MARGIN_MS = defaults.marginSeconds * 1000;
/** What one caller's Retry-After can hold the set for with the default limits: the minute plus the margin. */
const SHORTEST_HOLD_MS = 60_000 + MARGIN_MS;
const seconds = (ms: number) => Math.floor(ms / 1000);

/**
 * Four caps held, then a fifth: the vendor's minute window counting down to "3 left, resets in 30 s" (its reset
 * at T0 + 50 s), beside an hour with 600 left until T0 + 40 min.
 */
const FIFTH_CAP = {
  hour: { limit: 1000, remaining: 600, reset: seconds(T0) + 2400 },
  minutes: [
    [5_000, 20],
    [10_000, 10],
    [15_000, 6],
    [20_000, 3],
  ] as const,
  minuteReset: seconds(T0) + 50,
};

describe('vendor caps (pure core)', () => {
  it('a fifth minute cap "3 left, resets in 30 s" ends at its reset, not with the hour cap', () => {
    const core = new LedgerCore(defaults);
    expect(core.feedback(T0, FIFTH_CAP.hour)).toBe(true);
    for (const [after, remaining] of FIFTH_CAP.minutes)
      expect(core.feedback(T0 + after, { limit: 50, remaining, reset: FIFTH_CAP.minuteReset })).toBe(true);
    expect(core.acquire(T0 + 20_000, 3).granted).toBe(true);
    expect(core.acquire(T0 + 20_001, 1)).toMatchObject({
      granted: false,
      reason: 'VENDOR_CAP',
      retryAt: FIFTH_CAP.minuteReset * 1000,
    });
    // 30 s later the minute has reset: the set grants again up to its other limits (the ledger's minute ring
    // holds the 3 granted; the hour cap 597 more).
    expect(core.acquire(FIFTH_CAP.minuteReset * 1000, 47).granted).toBe(true);
    // One cap per limit: the hour's (the minute's ended at its reset).
    expect(core.state.caps).toEqual([
      { scope: '*', remaining: 600 - 3 - 47, until: FIFTH_CAP.hour.reset * 1000, windowMs: 3600_000 },
    ]);
  });

  it("H3: a report of the next window does not inherit the window before's spent cap: that one is kept by the ring", () => {
    const core = new LedgerCore(defaults);
    // "10 left until +30 s", all 10 granted at +1 s: the cap is spent until +30 s.
    core.feedback(T0, { limit: 50, remaining: 10, reset: seconds(T0) + 30 });
    expect(core.acquire(T0 + 1000, 10).granted).toBe(true);
    // The vendor's next window (a later reset, 40 left): before, put together with the spent cap, nothing more
    // until +85 s, its reset.
    core.feedback(T0 + 25_000, { limit: 50, remaining: 40, reset: seconds(T0) + 85 });
    expect(core.state.caps).toEqual([{ scope: '*', remaining: 40, until: T0 + 85_000, windowMs: 60_000 }]);
    // The spent cap still holds until its own end (the minute's ring, full until then)...
    const held = core.acquire(T0 + 25_000, 1);
    expect(held).toMatchObject({ granted: false, reason: 'QUOTA' });
    expect(held.granted === false && held.retryAt).toBeGreaterThanOrEqual(T0 + 30_000);
    expect(held.granted === false && held.retryAt).toBeLessThan(T0 + 32_000);
    // ...and then the next window's 40, no more, until its reset.
    expect(core.acquire(T0 + 32_000, 40).granted).toBe(true);
    expect(core.acquire(T0 + 32_001, 1)).toMatchObject({ granted: false, retryAt: T0 + 85_000 });
  });

  it('keeps one cap per limit: a tighter report replaces it, one that disagrees is put together within the limit', () => {
    const core = new LedgerCore(defaults);
    const reset = seconds(T0) + 40;
    core.feedback(T0, { limit: 50, remaining: 10, reset });
    core.feedback(T0 + 1000, { limit: 50, remaining: 4, reset });
    expect(core.state.caps).toEqual([{ scope: '*', remaining: 4, until: reset * 1000, windowMs: 60_000 }]);
    // Fewer left but an earlier reset: both hold, within the minute's own reach.
    core.feedback(T0 + 2000, { limit: 50, remaining: 2, reset: reset - 20 });
    expect(core.state.caps).toEqual([{ scope: '*', remaining: 2, until: reset * 1000, windowMs: 60_000 }]);
    // A limit the settings do not know is taken as the shortest window: the same cap.
    core.feedback(T0 + 3000, { limit: 7, remaining: 1, reset: reset + 3600 });
    expect(core.state.caps).toEqual([
      { scope: '*', remaining: 1, until: T0 + 3000 + SHORTEST_HOLD_MS, windowMs: 60_000 },
    ]);
  });
});

describe("a learned class's caps (pure core)", () => {
  // A learned class: 1/1 s kept, and another caller's provisional 1/5 s, which holds it too, until T0 + 2 s.
  const limits = rateLimitSettingsSchema.parse({
    general: [{ limit: 50, windowSeconds: 60 }],
    classes: { reports: [] },
    marginSeconds: 0.25,
    permitValiditySeconds: 0.2,
  });
  const view: LearnedView = {
    version: 1,
    at: T0,
    rises: {},
    classes: {
      reports: [
        { limit: 1, windowSeconds: 1, learnedAt: T0 - 60_000, by: 'a' },
        { limit: 1, windowSeconds: 5, learnedAt: T0 - 10_000, by: 'b', until: T0 + 2000 },
      ],
    },
  };
  const base = planFor(limits);
  const now = planIn(limits, base, view, T0);
  const then = planIn(limits, base, view, T0 + 2000);

  it('an answer\'s "none left until E" is kept where a provisional limit\'s ring holds as much now but ends before E: after it the class waits for E (was judged held by that ring: a vendor 429 once it ended)', () => {
    expect(now.classes.get('reports')?.map((s) => s.windowSeconds)).toEqual([5]);
    expect(then.classes.get('reports')?.map((s) => s.windowSeconds)).toEqual([1]);
    const state = stateAt(emptyState(), T0, base.marginMs);
    expect(acquire(state, now, T0, 1, 'reports').granted).toBe(true);
    // The answer to that grant, as the learned class reads it: its reset's latest reading 3 s on (C1), a window of
    // 1 s as its reset implies (classWindowMs): none of the 1 s ring, so its cap lands on the 5 s one.
    const answer: VendorFeedback = {
      class: 'reports',
      limit: 1,
      remaining: 0,
      resetMs: T0 + 3000,
      classWindowMs: 1000,
    };
    const lasting = stateAt(state, T0, base.marginMs);
    expect(applyVendorFeedback(lasting, now, T0, T0, { ...answer, planUntil: T0 + 10_000 })).toBe(false);
    expect(lasting.caps).toEqual([]);
    const ending = stateAt(state, T0, base.marginMs);
    expect(applyVendorFeedback(ending, now, T0, T0, { ...answer, planUntil: T0 + 2000 })).toBe(true);
    expect(ending.caps).toEqual([{ scope: 'reports', remaining: 0, until: T0 + 3000, windowMs: 5000 }]);
    // Once the provisional limit ended, the kept 1/1 s alone would grant; the cap holds the class to E.
    const at = T0 + 2500;
    expect(acquire(stateAt(lasting, at, base.marginMs), then, at, 1, 'reports').granted).toBe(true);
    expect(acquire(stateAt(ending, at, base.marginMs), then, at, 1, 'reports')).toMatchObject({
      granted: false,
      reason: 'VENDOR_CAP',
      retryAt: T0 + 3000,
    });
  });
});

describe('reported Retry-After (pure core)', () => {
  it('one caller holds the set, reserved consumers included, at most the shortest window plus the margin', () => {
    const core = new LedgerCore(reserved);
    expect(core.feedback(T0, { retryAfterSeconds: 3600 }, 'consumer-a')).toBe(true);
    expect(core.acquire(T0 + 1, 1, undefined, 'order-service')).toMatchObject({
      granted: false,
      reason: 'COOLDOWN',
      retryAt: T0 + SHORTEST_HOLD_MS,
    });
    // The same caller again (another of its processes) is no second opinion: its report holds a minute and
    // the margin from its own arrival, like the first.
    core.feedback(T0 + 10_000, { retryAfterSeconds: 3590 }, 'consumer-a');
    expect(core.acquire(T0 + 10_001, 1)).toMatchObject({
      reason: 'COOLDOWN',
      retryAt: T0 + 10_000 + SHORTEST_HOLD_MS,
    });
    expect(core.acquire(T0 + 10_000 + SHORTEST_HOLD_MS, 1, undefined, 'order-service').granted).toBe(true);
    expect(core.acquire(T0 + 10_000 + SHORTEST_HOLD_MS, 1).granted).toBe(true);
  });

  it('a second, different caller corroborates it: the set is held as far as both ask', () => {
    const core = new LedgerCore(reserved);
    core.feedback(T0, { retryAfterSeconds: 3600 }, 'consumer-a');
    expect(core.feedback(T0 + 20_000, { retryAfterSeconds: 1800 }, 'consumer-b')).toBe(true);
    expect(core.acquire(T0 + 25_000, 1, undefined, 'order-service')).toMatchObject({
      granted: false,
      reason: 'COOLDOWN',
      retryAt: T0 + 20_000 + 1800_000,
    });
  });

  it("the hour's own headers (remaining 0, reset far away) warrant holding until that reset", () => {
    const core = new LedgerCore(defaults);
    const reset = seconds(T0) + 3000;
    core.feedback(T0, { retryAfterSeconds: 3600, limit: 1000, remaining: 0, reset });
    expect(core.acquire(T0 + 100_000, 1)).toMatchObject({
      granted: false,
      reason: 'COOLDOWN',
      retryAt: reset * 1000,
    });
    // The minute's headers warrant only the minute.
    const minute = new LedgerCore(defaults);
    minute.feedback(T0, { retryAfterSeconds: 3600, limit: 50, remaining: 0, reset });
    expect(minute.acquire(T0 + 1, 1)).toMatchObject({ reason: 'COOLDOWN', retryAt: T0 + SHORTEST_HOLD_MS });
  });
});

/**
 * The property: random sequences of permit asks and reports (honest ones, from a vendor with fixed windows that
 * sees every granted permit, and lying ones: any limit, count, reset and Retry-After) from four callers. Checked
 * against the rules as stated, computed from the reports alone:
 * - caps: after a report "of limit L, r left until reset", grants of L's scope before the reset (clamped to L's
 *   window plus the margin from the report; an unknown or unnamed L is the shortest general window) are at most
 *   r; and a VENDOR_CAP denial at t needs a report on that same limit still in force at t, and a report on it
 *   whose count is used up (a minute report never holds the hour);
 * - cooldown: a permit is refused for COOLDOWN exactly while some report's warranted hold lasts (the shortest
 *   general window plus the margin, or until the reset of a general limit its headers show at 0), or two
 *   different callers both asked for longer (up to the nearer of their two Retry-Afters).
 */
describe('vendor feedback property (pure core)', () => {
  const limits = rateLimitSettingsSchema.parse({ classes: { reports: [{ limit: 10, windowSeconds: 60 }] } });
  const plan = planFor(limits);
  const CALLERS = ['c0', 'c1', 'c2', 'c3'];
  const span = (windowSeconds: number) => windowSeconds * 1000 + plan.marginMs;
  /** The limit a report names, as the rule says: general first, then a class's, else the shortest general. */
  const named = (limit: number | undefined) => {
    if (limit === 50) return { slot: '*/60', scope: '*', spanMs: span(60), general: true };
    if (limit === 1000) return { slot: '*/3600', scope: '*', spanMs: span(3600), general: true };
    if (limit === 10) return { slot: 'reports/60', scope: 'reports', spanMs: span(60), general: false };
    return { slot: '*/60', scope: '*', spanMs: span(60), general: false };
  };

  type Event =
    | { kind: 'ask'; dt: number; k: number; cls: string | undefined }
    | { kind: 'honest'; dt: number; caller: number; limit: 50 | 1000 | 10 }
    | { kind: 'lie'; dt: number; caller: number; feedback: VendorFeedback };
  const dt = fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0, max: 5_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 400_000 }) },
  );
  const event: fc.Arbitrary<Event> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('ask' as const),
        dt,
        k: fc.integer({ min: 1, max: 8 }),
        cls: fc.constantFrom(undefined, 'reports'),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('honest' as const),
        dt,
        caller: fc.nat(3),
        limit: fc.constantFrom(50 as const, 1000 as const, 10 as const),
      }),
    },
    // Lying headers: any limit (7 is none the settings know), count and reset, sometimes no limit at all.
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('lie' as const),
        dt,
        caller: fc.nat(3),
        feedback: fc.record(
          {
            limit: fc.constantFrom(50, 1000, 10, 7),
            remaining: fc.integer({ min: 0, max: 30 }),
            reset: fc.integer({ min: -10, max: 5000 }),
          },
          { requiredKeys: ['remaining', 'reset'] },
        ),
      }),
    },
    // Lying Retry-Afters, sometimes with headers.
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('lie' as const),
        dt,
        caller: fc.nat(3),
        feedback: fc.record(
          {
            retryAfterSeconds: fc.integer({ min: 0, max: 5000 }),
            limit: fc.constantFrom(50, 1000, 10, 7),
            remaining: fc.integer({ min: 0, max: 60 }),
            reset: fc.integer({ min: -10, max: 5000 }),
          },
          { requiredKeys: ['retryAfterSeconds'] },
        ),
      }),
    },
  );

  interface Report {
    index: number;
    at: number;
    caller: string;
    feedback: VendorFeedback;
  }
  interface Grant {
    index: number;
    t: number;
    k: number;
    cls: string | undefined;
  }

  const appliesTo = (scope: string, cls: string | undefined) => scope === '*' || scope === cls;
  const grantsAfter = (grants: readonly Grant[], index: number, scope: string) =>
    grants.filter((g) => g.index > index && appliesTo(scope, g.cls)).reduce((sum, g) => sum + g.k, 0);
  const capUntil = (r: Report) => {
    const { spanMs } = named(r.feedback.limit);
    return Math.min(
      r.feedback.reset === undefined ? Number.POSITIVE_INFINITY : r.feedback.reset * 1000,
      r.at + spanMs,
    );
  };
  /** When the cooldown rule lets grants resume, as of the reports so far. */
  const holdUntil = (reports: readonly Report[]) => {
    let hold = 0;
    const claims: { caller: string; claim: number }[] = [];
    for (const r of reports) {
      const { retryAfterSeconds, limit, remaining, reset } = r.feedback;
      if (retryAfterSeconds === undefined) continue;
      const asked = Math.min(Math.ceil(retryAfterSeconds * 1000), plan.maxSpanMs);
      let warrant = span(60);
      if (named(limit).general && limit !== undefined && remaining === 0 && reset !== undefined)
        warrant = Math.max(warrant, Math.min(reset * 1000 - r.at, named(limit).spanMs));
      hold = Math.max(hold, r.at + Math.min(asked, warrant));
      claims.push({ caller: r.caller, claim: Math.floor((r.at + asked) / 1000) * 1000 });
    }
    for (const a of claims)
      for (const b of claims) if (a.caller !== b.caller) hold = Math.max(hold, Math.min(a.claim, b.claim));
    return hold;
  };

  it('never grants more than a cap allows before its reset, and never holds longer than the rule says', () => {
    // How often each rule decided something over all runs: a property that never meets a case proves nothing.
    const seen = { capDenials: 0, cooldownDenials: 0, corroborated: 0, capsHeld: 0 };
    fc.assert(
      fc.property(fc.array(event, { minLength: 1, maxLength: 120 }), (events) => {
        const core = new LedgerCore(limits);
        const reports: Report[] = [];
        const grants: Grant[] = [];
        let t = T0;
        events.forEach((e, index) => {
          t += e.dt;
          if (e.kind === 'ask') {
            const outcome = core.acquire(t, e.k, e.cls);
            const held = holdUntil(reports) > t;
            if (held && holdUntil(reports.map((r) => ({ ...r, caller: 'one' }))) <= t) seen.corroborated++;
            if (held) seen.cooldownDenials++;
            seen.capsHeld = Math.max(seen.capsHeld, core.state.caps.length);
            expect(!outcome.granted && outcome.reason === 'COOLDOWN').toBe(held);
            if (outcome.granted) {
              grants.push({ index, t, k: e.k, cls: e.cls });
              for (const r of reports) {
                if (r.feedback.remaining === undefined || capUntil(r) <= t) continue;
                const { scope } = named(r.feedback.limit);
                if (appliesTo(scope, e.cls))
                  expect(grantsAfter(grants, r.index, scope)).toBeLessThanOrEqual(r.feedback.remaining);
              }
            } else if (outcome.reason === 'VENDOR_CAP') {
              const capped = reports.filter(
                (r) => r.feedback.remaining !== undefined && appliesTo(named(r.feedback.limit).scope, e.cls),
              );
              const justified = capped.some(
                (a) =>
                  capUntil(a) > t &&
                  capped.some(
                    (b) =>
                      named(b.feedback.limit).slot === named(a.feedback.limit).slot &&
                      (b.feedback.remaining as number) -
                        grantsAfter(grants, b.index, named(b.feedback.limit).scope) <
                        e.k,
                  ),
              );
              expect(justified).toBe(true);
              seen.capDenials++;
            }
            return;
          }
          let feedback: VendorFeedback;
          if (e.kind === 'honest') {
            // A vendor with fixed windows aligned to the epoch that saw every granted permit sent at its grant.
            const windowMs = e.limit === 1000 ? 3600_000 : 60_000;
            const start = Math.floor(t / windowMs) * windowMs;
            const scope = e.limit === 10 ? 'reports' : '*';
            const sent = grants
              .filter((g) => g.t >= start && appliesTo(scope, g.cls))
              .reduce((s, g) => s + g.k, 0);
            const remaining = Math.max(0, e.limit - sent);
            const reset = (start + windowMs) / 1000;
            feedback = {
              limit: e.limit,
              remaining,
              reset,
              ...(remaining === 0 ? { retryAfterSeconds: Math.ceil(reset - t / 1000) } : {}),
            };
          } else {
            feedback = { ...e.feedback };
            if (feedback.reset !== undefined) feedback.reset += seconds(t);
            if (feedback.reset !== undefined && feedback.reset <= 0) delete feedback.reset;
            if (feedback.remaining !== undefined && feedback.reset === undefined) delete feedback.remaining;
          }
          const caller = CALLERS[e.caller] as string;
          core.feedback(t, feedback, caller);
          reports.push({ index, at: Math.max(t, core.state.time), caller, feedback });
        });
      }),
      { numRuns: 1000 },
    );
    expect(seen.capDenials).toBeGreaterThan(50);
    expect(seen.cooldownDenials).toBeGreaterThan(50);
    expect(seen.corroborated).toBeGreaterThan(0);
    // Both general limits and the class's, at once.
    expect(seen.capsHeld).toBe(3);
    console.info(`vendor feedback property: ${JSON.stringify(seen)}`);
  });
});

describe.each(ENGINES)('vendor feedback through DynamoRateLedger on %s', (engine) => {
  const TOKEN = '5c4b3a2918070605';
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let table: string;
  let clock: ManualClock;
  const ledger = () => new DynamoRateLedger({ client, tableName: table, clock, random: () => 0 });
  const item = async () =>
    (await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: `token#${TOKEN}` } } })))
      .Item ?? {};

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    table = await dynamo.createTable('ledger-feedback');
    clock = new ManualClock(T0);
  });

  it('four caps held, a fifth minute cap "3 left, resets in 30 s": after 30 s the set grants again', async () => {
    const a = ledger();
    const b = ledger();
    await a.reportVendorFeedback({ tokenId: TOKEN, caller: 'a', limits: defaults, ...FIFTH_CAP.hour });
    for (const [after, remaining] of FIFTH_CAP.minutes) {
      await clock.advance(T0 + after - clock.now());
      await (after % 10_000 === 0 ? a : b).reportVendorFeedback({
        tokenId: TOKEN,
        caller: 'b',
        limits: defaults,
        limit: 50,
        remaining,
        reset: FIFTH_CAP.minuteReset,
      });
    }
    granted(await b.acquire({ tokenId: TOKEN, caller: 'x', count: 3, limits: defaults }));
    expect(
      denied(await a.acquire({ tokenId: TOKEN, caller: 'x', count: 1, limits: defaults })),
    ).toMatchObject({
      reason: 'VENDOR_CAP',
      retryAfterMs: FIFTH_CAP.minuteReset * 1000 - clock.now(),
    });
    // The item keeps one cap per limit, in a form release N-1 reads (and applies to every window: more careful).
    const stored = await item();
    const caps = (stored.cap?.S ?? '').split(';');
    expect(caps).toHaveLength(2);
    for (const cap of caps) expect(cap).toMatch(/^([a-z*][a-z0-9-]*):([0-9a-z]+):([0-9a-z]+)$/);
    expect(stored.cw?.S).toMatch(/^[A-Za-z0-9_-]{3}:2s0,1o$/);
    await clock.advance(FIFTH_CAP.minuteReset * 1000 - clock.now());
    granted(await a.acquire({ tokenId: TOKEN, caller: 'x', count: 47, limits: defaults }));
  });

  it('one caller reporting Retry-After 3600 holds the set and a reserved consumer at most a minute plus the margin; a second caller holds it longer', async () => {
    const a = ledger();
    const b = ledger();
    await a.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'consumer-a',
      limits: reserved,
      retryAfterSeconds: 3600,
    });
    const ask = (l: DynamoRateLedger, consumer?: string) =>
      l.acquire({
        tokenId: TOKEN,
        caller: consumer ?? 'x',
        ...(consumer ? { consumer } : {}),
        count: 1,
        limits: reserved,
      });
    expect(denied(await ask(b, 'order-service'))).toMatchObject({
      reason: 'COOLDOWN',
      retryAfterMs: SHORTEST_HOLD_MS,
    });
    // cd stays a plain number (what N-1 reads); the claim beyond it is kept apart, with its caller's tag.
    expect((await item()).cd?.N).toBe(String(T0 + SHORTEST_HOLD_MS));
    expect((await item()).cdr?.S).toBe(`${callerTag('consumer-a')}${(seconds(T0) + 3600).toString(36)}`);
    // The same caller from another process is no corroboration.
    await clock.advance(10_000);
    await b.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'consumer-a',
      limits: reserved,
      retryAfterSeconds: 3590,
    });
    expect(denied(await ask(a))).toMatchObject({ reason: 'COOLDOWN', retryAfterMs: SHORTEST_HOLD_MS });
    await clock.advance(SHORTEST_HOLD_MS);
    granted(await ask(b, 'order-service'));
    granted(await ask(a));
    // A different caller, in another process: both asked for at least 1800 s from now.
    await b.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'consumer-b',
      limits: reserved,
      retryAfterSeconds: 1800,
    });
    expect(denied(await ask(a, 'order-service'))).toMatchObject({
      reason: 'COOLDOWN',
      retryAfterMs: 1800_000,
    });
  });

  it("the hour's headers at 0 with a far reset make one caller's Retry-After hold until that reset", async () => {
    const a = ledger();
    const reset = seconds(T0) + 3000;
    await a.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'consumer-a',
      limits: reserved,
      retryAfterSeconds: 3600,
      limit: 1000,
      remaining: 0,
      reset,
    });
    await clock.advance(SHORTEST_HOLD_MS + 60_000);
    const no = denied(
      await ledger().acquire({
        tokenId: TOKEN,
        caller: 'o',
        consumer: 'order-service',
        count: 1,
        limits: reserved,
      }),
    );
    expect(no).toMatchObject({ reason: 'COOLDOWN', retryAfterMs: reset * 1000 - clock.now() });
  });

  it('stays safe when release N-1 rewrites the caps and leaves the windows stale', async () => {
    const a = ledger();
    await a.reportVendorFeedback({ tokenId: TOKEN, caller: 'a', limits: defaults, ...FIFTH_CAP.hour });
    await a.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'a',
      limits: defaults,
      limit: 50,
      remaining: 20,
      reset: FIFTH_CAP.minuteReset,
    });
    const before = await item();
    // N-1's full write: its own attributes only (it merged the minute cap into the hour one, as it does with a
    // fifth cap), `cw` left as it was.
    const hourUntil = (FIFTH_CAP.hour.reset * 1000).toString(36);
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: `token#${TOKEN}` } },
        UpdateExpression: 'SET #v = :v, #cap = :cap',
        ExpressionAttributeNames: { '#v': 'v', '#cap': 'cap' },
        ExpressionAttributeValues: {
          ':v': { N: String(Number(before.v?.N) + 1) },
          ':cap': { S: `*:k:${hourUntil}` },
        },
      }),
    );
    expect((await item()).cw?.S).toBe(before.cw?.S);
    // Read with the windows unknown: the one cap is taken as the hour's (its end is beyond any minute's reach).
    await clock.advance(20_000);
    await a.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'a',
      limits: defaults,
      limit: 50,
      remaining: 3,
      reset: FIFTH_CAP.minuteReset,
    });
    expect(denied(await a.acquire({ tokenId: TOKEN, caller: 'x', count: 4, limits: defaults })).reason).toBe(
      'VENDOR_CAP',
    );
    await clock.advance(FIFTH_CAP.minuteReset * 1000 - clock.now());
    // The minute cap ended at its reset; what N-1 merged (20 for the hour) still holds, as N-1 would.
    granted(await a.acquire({ tokenId: TOKEN, caller: 'x', count: 20, limits: defaults }));
    expect(denied(await a.acquire({ tokenId: TOKEN, caller: 'x', count: 1, limits: defaults })).reason).toBe(
      'VENDOR_CAP',
    );
    expect((await item()).cw?.S).toMatch(/^[A-Za-z0-9_-]{3}:2s0$/);
  });
});
