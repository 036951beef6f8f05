import { describe, expect } from 'vitest';
import { ENGINES } from './support/engines.js';
import {
  A,
  B,
  type Caller,
  DAY,
  family,
  HOUR,
  LIAR,
  learnedWorlds,
  MINUTE,
  shown,
  T0,
} from './support/learned-world.js';
import { itTakingTurns } from './support/property-runs.js';
import type { Reply } from './support/sandbox-http.js';

/**
 * Issue 32's cases of trust, holds and waits (docs/class-limits.md I1, I2, T1, T2, H1, H2): what one caller's word
 * (a liar's, or a mistaken one's) and an honest 429 do to a learned class, as its consumers see it: permits,
 * vendor 429s, retry-afters, what `ledger.learned(set)` lists. Callers take a permit, send the request to the
 * vendor sandbox over HTTP and report its answer as client/rate-feedback.ts does (test/support/learned-world.ts).
 * Each test's name gives the figure the landed code (a6dc151) measured ("was ..."), its assertions the figure now.
 */
describe.each(ENGINES)('issue 32 cases: trust, holds and waits, on %s', (engine) => {
  const it = itTakingTurns(engine, ENGINES, { 'I1:': 1, 'T2:': 1 }, 'the other engine');
  const world = learnedWorlds(engine);

  it('I2: "limit 10, remaining 10, reset a day ahead" from one caller teaches nothing: a day later 10 and 10 in two minutes (was kept 10 per 86400 s: 10, then 0)', async () => {
    const w = await world({ families: [family('reports', [10, 60])], start: T0 + 10_300 });
    const callers = [w.caller(A), w.caller(B)];
    await w.greedy(callers, w.clock.now() + 2 * MINUTE);
    const liar = w.caller(LIAR);
    await liar.report({
      class: 'reports',
      limit: 10,
      remaining: 10,
      reset: Math.floor((w.clock.now() + DAY) / 1000),
    });
    const learned = await callers[0]?.learned();
    await w.clock.advance(DAY);
    const from = w.clock.now();
    await w.greedy(callers, from + 2 * MINUTE);
    const figures = {
      learned,
      firstMinute: w.granted('reports', from, from + MINUTE),
      nextMinute: w.granted('reports', from + MINUTE, from + 2 * MINUTE),
      rejected: w.rejected('reports').length,
    };
    const message = shown('I2', figures);
    expect(learned, message).toEqual(['10/60s']);
    expect([figures.firstMinute, figures.nextMinute], message).toEqual([10, 10]);
    expect(figures.rejected, message).toBe(0);
  });

  it("I1: honest 429s of the general hour (1000 per 3600 s) on two callers' class requests teach the class nothing: two hours later more than 100 permits in 5 minutes (was the kept 30/60 s made 30/86400 s: 30)", async () => {
    const w = await world({
      families: [family('reports', [10, 10], [30, 60])],
      windowKind: 'sliding',
      general: [[1000, 3600]],
      start: T0 + 5_300,
    });
    const callers = [w.caller(A), w.caller(B)];
    await w.greedy(callers, w.clock.now() + 2 * MINUTE);
    const before = await callers[0]?.learned();
    // The rest of the hour goes to other uses of the token (the ledger does not see them).
    let general = 0;
    for (let served = 100; served === 100; general += served)
      served = await w.sendUnpermitted(undefined, 100);
    await w.clock.advance(MINUTE);
    // Both callers' class requests meet it (sent at once: the second was in flight when the first 429 came).
    const [a, b] = callers as [Caller, Caller];
    expect([(await a.ask('reports')).granted, (await b.ask('reports')).granted]).toEqual([true, true]);
    const replies = [await w.send('reports'), await w.send('reports')];
    await a.answered('reports', replies[0] as Reply);
    await b.answered('reports', replies[1] as Reply);
    const hourAnswer = replies.map((r) => `${r.status} ${r.headers.get('x-ratelimit-limit')}`);
    const after = await callers[0]?.learned();
    const generalHeld = await (callers[1] as Caller).ask(undefined);
    await w.clock.advance(2 * HOUR);
    const from = w.clock.now();
    await w.greedy(callers, from + 5 * MINUTE);
    const figures = {
      before,
      general,
      hourAnswer,
      after,
      generalHeld: generalHeld.granted ? 'granted' : generalHeld.reason,
      later: w.granted('reports', from, from + 5 * MINUTE),
      rejected: w.rejected('reports', from).length,
    };
    const message = shown('I1', figures);
    expect(hourAnswer, message).toEqual(['429 1000', '429 1000']);
    expect(before, message).toEqual(['10/10s', '30/60s']);
    expect(after, message).toEqual(before);
    // Its headers name a general limit at 0: the general permits are held (H1).
    expect(figures.generalHeld, message).toBe('COOLDOWN');
    expect(figures.later, message).toBeGreaterThan(100);
    expect(figures.rejected, message).toBe(0);
  });

  it("T1: a liar's 49 per 60 s on the probe and the honest 10 per 60 s: 5 minutes later the probe, and a burst of 30 asks gets 1, no 429 (was 49/60 s kept: 30 of 30, 20 429s)", async () => {
    const w = await world({ families: [family('reports', [10, 60])], start: T0 + 10_300 });
    const honest = w.caller(A);
    const liar = w.caller(LIAR);
    const probe = await honest.ask('reports');
    expect(probe.granted).toBe(true);
    const reply = await w.send('reports');
    await liar.report({
      class: 'reports',
      limit: 49,
      remaining: 48,
      reset: Math.floor(w.clock.now() / 1000) + 60,
    });
    await honest.answered('reports', reply);
    const learned = await honest.learned();
    await w.clock.advance(5 * MINUTE);
    const later = await honest.learned();
    // 30 asks at once (workers of one service), each permit's request sent when all were decided.
    const burst = [];
    for (let i = 0; i < 30; i++) burst.push(await honest.ask('reports'));
    const granted = burst.filter((d) => d.granted).length;
    const replies = [];
    for (let i = 0; i < granted; i++) replies.push(await w.send('reports'));
    const figures = { learned, later, granted, rejected: replies.filter((r) => r.status === 429).length };
    const message = shown('T1', figures);
    expect(learned, message).toEqual(['10/60s?', '49/60s?']);
    // One caller's word each, both ended: back on the probe, one grant a span.
    expect(figures.later, message).toEqual([]);
    expect(figures.granted, message).toBe(1);
    expect(figures.rejected, message).toBe(0);
  });

  /**
   * A kept 7 per 15 s (sliding); then a mistaken caller reports "limit 1, remaining 0, reset +60 s" for its own
   * request's answer, twice (the second when its own fake limit let it send again).
   */
  async function liarOnKept() {
    const w = await world({
      families: [family('reports', [7, 15])],
      windowKind: 'sliding',
      start: T0 + 5_300,
    });
    const callers = [w.caller(A), w.caller(B)];
    await w.greedy(callers, w.clock.now() + MINUTE);
    const before = await callers[0]?.learned();
    await w.clock.advance(20_000);
    const liar = w.caller(LIAR);
    const lie = async () => {
      expect((await liar.ask('reports')).granted).toBe(true);
      await w.send('reports');
      await liar.report({
        class: 'reports',
        limit: 1,
        remaining: 0,
        reset: Math.floor(w.clock.now() / 1000) + 60,
      });
    };
    await lie();
    const held = await callers[0]?.learned();
    await w.clock.advance(63_500);
    await lie();
    const lastLie = w.clock.now();
    // Its word ends a window and three margins after its last report, or after the latest its reset can mean (the
    // whole second it names, on a vendor clock measured to within a second: C1), whichever is later (T2).
    const resetLatest = (Math.floor(lastLie / 1000) + 60) * 1000 + 1000;
    return { w, callers, before, held, lastLie, endsAt: Math.max(lastLie + 60_000, resetLatest) + 9000 };
  }

  it("T2: one caller's fake 1 per 60 s, sent twice, holds the class at most its window and three margins after the last: then 7 per 15 s again, across a restart, no 429 (a6dc151 ended it at +63 s too, no 429)", async () => {
    const { w, callers, before, held, lastLie, endsAt } = await liarOnKept();
    const honest = callers[1] as Caller;
    await w.greedy([honest], endsAt);
    const ended = await honest.learned();
    const from = w.clock.now();
    await w.greedy([honest], from + MINUTE);
    w.restart();
    await w.greedy([honest], from + 2 * MINUTE);
    const figures = {
      before,
      held,
      ended,
      minuteAfter: w.granted('reports', from, from + MINUTE),
      afterRestart: w.granted('reports', from + MINUTE, from + 2 * MINUTE),
      rejected: w.rejected('reports').length,
      rejectedAt: w.rejected('reports').map((a) => `+${(a.at - lastLie) / 1000} s, limit ${a.limit}`),
    };
    const message = shown('T2', figures);
    expect(before, message).toEqual(['7/15s']);
    expect(held, message).toEqual(['7/15s', '1/60s?']);
    expect(ended, message).toEqual(['7/15s']);
    // 7 per 15 s and the margin: 21 or more a minute.
    expect(figures.minuteAfter, message).toBeGreaterThanOrEqual(21);
    expect(figures.afterRestart, message).toBeGreaterThanOrEqual(21);
    expect(figures.rejected, message).toBe(0);
  });

  it('H2: a denial at +65 s while a fake 1 per 60 s holds the class says retry in 4 s, when it ends, not when its ring frees at +126 s, and no sooner (a6dc151 ended the fake at +63 s: 16.6 s, the 7/15 s ring)', async () => {
    const { w, callers, lastLie, endsAt } = await liarOnKept();
    const honest = callers[1] as Caller;
    // The class's one grant under the fake limit (its ring frees at +63 s), then a denial at +65 s: the fake limit
    // ends at about +70 s (its reset's latest reading and three margins, T2).
    await w.greedy([honest], lastLie + 65_000);
    const denial = await honest.ask('reports');
    const endsInMs = endsAt - w.clock.now();
    const retryAfterMs = denial.granted ? 0 : denial.retryAfterMs;
    // The earliest moment: an ask a second sooner is denied, one then is granted.
    await w.clock.advance(retryAfterMs - 1000);
    const sooner = await honest.ask('reports');
    await w.clock.advance(1000);
    const retry = await honest.ask('reports');
    const figures = {
      denied: !denial.granted,
      retryAfterMs,
      endsInMs,
      sooner: sooner.granted,
      retried: retry.granted,
    };
    const message = shown('H2', figures);
    expect(figures.denied, message).toBe(true);
    expect(retryAfterMs, message).toBeLessThanOrEqual(endsInMs);
    expect([figures.sooner, figures.retried], message).toEqual([false, true]);
  });

  it('H1: a rebalancing 429 (Retry-After 24 s) holds rebalancing only: general and reports permits at once (was COOLDOWN for all three)', async () => {
    const w = await world({
      families: [family('reports', [10, 60]), family('rebalancing', [4, 60])],
      windowKind: 'sliding',
      start: T0 + 5_300,
    });
    const caller = w.caller(A);
    // Another use of the token fills the vendor's rebalancing minute 36 s before the class is first used.
    await w.sendUnpermitted('rebalancing', 4);
    await w.clock.advance(36_000);
    const step = await caller.use('rebalancing');
    const answer = [step.reply?.status, step.reply?.headers.get('retry-after')];
    const general = await caller.ask(undefined);
    const reports = await caller.ask('reports');
    const rebalancing = await caller.ask('rebalancing');
    const figures = {
      answer,
      general: general.granted ? 'granted' : general.reason,
      reports: reports.granted ? 'granted' : reports.reason,
      rebalancing: rebalancing.granted
        ? 'granted'
        : `${rebalancing.reason} ${rebalancing.retryAfterSeconds} s`,
    };
    const message = shown('H1', figures);
    expect(answer, message).toEqual([429, '24']);
    expect(figures.general, message).toBe('granted');
    expect(figures.reports, message).toBe('granted');
    expect(rebalancing.granted, message).toBe(false);
    expect(rebalancing.granted ? 0 : rebalancing.retryAfterSeconds, message).toBeGreaterThanOrEqual(24);
  });
});
