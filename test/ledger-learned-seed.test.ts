import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { inForce, type LearnedLimit } from '../shared/ledger/learned-limits.js';
import { teachReport } from '../shared/ledger/learned-reports.js';
import { seedLearnedRing } from '../shared/ledger/learned-rings.js';
import { acquire, emptyState, type LedgerState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';

/**
 * A learned class's second limit is named by the vendor only once it is the tighter one, well into its window:
 * its new ring is seeded with what the vendor counted (learned-rings.ts, seedLearnedRing). The vendor releases
 * those requests as they age out of its window; so must the ledger, as far as its own history tells when they
 * were made. Before, all of them were put at the moment of learning: the class idle for as long as the learning
 * took, a window later (issue 24's classes soak: 71 % of the quota used).
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const limits = rateLimitSettingsSchema.parse({
  general: [
    { limit: 50, windowSeconds: 10 },
    { limit: 300, windowSeconds: 60 },
  ],
  marginSeconds: 0.5,
  permitValiditySeconds: 0.4,
  classes: { reports: [] },
});
const minuteOnly = planFor(limits, { reports: [{ limit: 10, windowSeconds: 10 }] });
const both = planFor(limits, {
  reports: [
    { limit: 10, windowSeconds: 10 },
    { limit: 30, windowSeconds: 60 },
  ],
});
const taught = (learnedAt: number) => [
  { limit: 10, windowSeconds: 10, learnedAt: T0 },
  { limit: 30, windowSeconds: 60, learnedAt },
];

/** 10 reports at 1 s, 11.6 s and 22.2 s (each a 10 s window plus the margin after the one before). */
function threeBatches(): LedgerState {
  let state = emptyState();
  for (const at of [T0 + 1000, T0 + 11_600, T0 + 22_200]) {
    state = stateAt(state, at, minuteOnly.marginMs);
    expect(acquire(state, minuteOnly, at, 10, 'reports').granted).toBe(true);
  }
  return state;
}

const ask = (state: LedgerState, at: number, k: number) =>
  acquire(stateAt(state, at, both.marginMs), both, at, k, 'reports').granted;

describe('a learned class limit named late in its window', () => {
  it('frees the requests the vendor counted as they leave its window, not a window after the learning', () => {
    const learnedAt = T0 + 22_300;
    const state = stateAt(threeBatches(), learnedAt, both.marginMs);
    // The vendor: 30 of 30 used in its minute, the oldest leaving at 61 s.
    expect(seedLearnedRing(state, both, learnedAt, 'reports', 60, 30, taught(learnedAt))).toBe(true);
    // Full while the vendor's minute holds all 30 (its oldest 10 leave at 61 s).
    expect(ask(state, learnedAt + 1, 1)).toBe(false);
    expect(ask(state, T0 + 61_000, 1)).toBe(false);
    // The first 10 out of the window plus the margin: 10 more, not at 82.8 s (22.3 s + 60.5 s).
    expect(ask(state, T0 + 62_500, 10)).toBe(true);
  });

  it('counts on the shorter limit in a span that began before it was learned, for the part after', () => {
    const learnedAt = T0 + 22_300;
    const state = stateAt(threeBatches(), learnedAt, both.marginMs);
    // The 10 per 10 s learned 0.5 s in: the span (1.3 s, 11.8 s] held at most 10 after 1.5 s (0.5 s and two
    // margins), and what came before 1.5 s came before it. So the first batch counts from 1.5 s, not 11.8 s.
    const early = [
      { limit: 10, windowSeconds: 10, learnedAt: T0 + 500 },
      { limit: 30, windowSeconds: 60, learnedAt },
    ];
    seedLearnedRing(state, both, learnedAt, 'reports', 60, 30, early);
    expect(ask(state, T0 + 61_900, 1)).toBe(false);
    expect(ask(state, T0 + 62_500, 10)).toBe(true);
  });

  it('never frees them before the vendor does: none of the second batch before it leaves its window', () => {
    const learnedAt = T0 + 22_300;
    const state = stateAt(threeBatches(), learnedAt, both.marginMs);
    seedLearnedRing(state, both, learnedAt, 'reports', 60, 30, taught(learnedAt));
    expect(ask(state, T0 + 62_500, 10)).toBe(true);
    // 20 of the vendor's minute are the batches of 11.6 s and 22.2 s, 10 the grant at 62.5 s: full until 71.6 s.
    const later = stateAt(state, T0 + 62_500, both.marginMs);
    acquire(later, both, T0 + 62_500, 10, 'reports');
    expect(ask(later, T0 + 71_500, 1)).toBe(false);
  });

  it('puts what its own history cannot place where that history ends, never earlier', () => {
    const learnedAt = T0 + 22_300;
    const state = stateAt(threeBatches(), learnedAt, both.marginMs);
    // The minute's 10 per 10 s taught only just now: what came before was held by something else (the probe).
    const recent = [
      { limit: 10, windowSeconds: 10, learnedAt: T0 + 21_000 },
      { limit: 30, windowSeconds: 60, learnedAt },
    ];
    seedLearnedRing(state, both, learnedAt, 'reports', 60, 30, recent);
    // The 10 of 22.2 s at their time; the 20 the ledger cannot place, where its own history ends (11.8 s): none
    // free when the oldest batch leaves the vendor's window, 10 (the 10 s limit's most) once 11.8 s is a window
    // and a margin old, not at 82.8 s.
    expect(ask(state, T0 + 62_500, 1)).toBe(false);
    expect(ask(state, T0 + 71_500, 1)).toBe(false);
    expect(ask(state, T0 + 72_500, 10)).toBe(true);
  });
});

describe('a learned limit taught again right after it lapsed', () => {
  const general = [{ limit: 50, windowSeconds: 10 }];
  const report = (at: number, by: string, limit = 4, resetMs = at + 9900, remaining = limit - 1) => ({
    limit,
    resetSeconds: Math.ceil(resetMs / 1000),
    at,
    by,
    remaining,
    refused: false,
    offset: { lo: 0, hi: 0 },
  });
  const learn = (current: LearnedLimit[], r: ReturnType<typeof report>) =>
    teachReport(current, r, { general, configured: [], marginMs: 500, maxWindows: 3 }).next;

  it('has held since it was first learned when the probe held the class meanwhile', () => {
    const first = learn([], report(T0 + 100, 'a')) ?? [];
    expect(first).toMatchObject([{ limit: 4, windowSeconds: 10, learnedAt: T0 + 100 }]);
    // Its caller's reports paused past its end (the window full until its reset): the probe held the class.
    const again = learn(first, report(T0 + 12_000, 'a'));
    expect(again).toMatchObject([{ limit: 4, windowSeconds: 10, learnedAt: T0 + 100 }]);
  });

  it('holds from now when another limit was in force after it lapsed, or the probe is looser', () => {
    const first = learn([], report(T0 + 100, 'a')) ?? [];
    // A 12 per minute taught by the same caller later: in force after the 4 per 10 s lapsed.
    const both = learn(first, report(T0 + 9000, 'a', 12, T0 + 58_000, 3));
    expect(both?.map((l) => l.limit).sort()).toEqual([12, 4]);
    const later = T0 + 71_000;
    expect(inForce(learn(both ?? [], report(later, 'a')), later)).toMatchObject([
      { limit: 4, learnedAt: later },
    ]);
    // 1 per 10 s is what the probe allows: it is no tighter than the probe, which may have let 2 through in a span.
    const one = learn([], report(T0 + 100, 'a', 1)) ?? [];
    expect(learn(one, report(T0 + 12_000, 'a', 1))).toMatchObject([{ limit: 1, learnedAt: T0 + 12_000 }]);
  });
});
