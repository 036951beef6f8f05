import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import type { ClassEvidence, LearnedLimit } from '../shared/ledger/learned-limits.js';
import { boundClassRings } from '../shared/ledger/learned-rings.js';
import {
  observeRise,
  RISE_BLOCK_MS,
  RISE_TRIAL_WINDOWS,
  type RiseState,
  trialLimitOf,
} from '../shared/ledger/learned-rise.js';
import { acquire, emptyState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor, ringKey } from '../shared/ledger/limit-plan.js';

/**
 * Rules R1-R4 and M3 of docs/class-limits.md, pure: a kept limit rises only through a bounded trial two callers
 * start, and a learned class keeps no more rings in its item than it is sized for, whatever a liar reports.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const MINUTE = 60_000;
const kept: LearnedLimit[] = [{ limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a' }];
const said = (by: string, at: number, limit = 20, refused = false): ClassEvidence => ({
  limit,
  windowSeconds: 60,
  at,
  by,
  refused,
});
const never = () => false;
const always = () => true;

describe('limits that rise (learned-rise.ts)', () => {
  it('R1: one caller reporting a larger limit starts no trial; a second one does', () => {
    const one = observeRise([], kept, said('liar', T0), never);
    expect(one.rises).toEqual([{ limit: 10, windowSeconds: 60, seen: [{ by: 'liar', at: T0, to: 20 }] }]);
    // The same caller again: still one caller, and within half a window nothing to write.
    expect(observeRise(one.rises, kept, said('liar', T0 + 1000), never).changed).toBe(false);
    const two = observeRise(one.rises, kept, said('b', T0 + 2000), never);
    expect(two.rises[0]?.trialSince).toBe(T0 + 2000);
    // A larger limit over a window longer than the kept one's is another window's: no evidence.
    expect(observeRise([], kept, { ...said('a', T0), windowSeconds: 120 }, never).rises).toEqual([]);
  });

  it('R2: the trial holds the class one above what the kept limit lets through at its pace', () => {
    expect(trialLimitOf({ limit: 10, windowSeconds: 60 }, 3000)).toBe(11);
    // 30 per 60 s widened by 3 s lets 30 per 63 s through: 31 would never reach 30 in a minute at its pace.
    expect(trialLimitOf({ limit: 30, windowSeconds: 60 }, 3000)).toBe(32);
  });

  it('R3: adopted three windows in, once its ring was full a window before, with the smaller reported limit', () => {
    let rises = observeRise([], kept, said('a', T0, 25), never).rises;
    rises = observeRise(rises, kept, said('b', T0 + 1000, 20), never).rises;
    // Full soon after it began: remembered.
    rises = observeRise(rises, kept, said('a', T0 + 5000, 25), always).rises;
    expect(rises[0]?.fullSince).toBe(T0 + 5000);
    // Not before three windows.
    const early = observeRise(rises, kept, said('b', T0 + 1000 + RISE_TRIAL_WINDOWS * MINUTE - 1), always);
    expect(early.learned).toBeUndefined();
    const at = T0 + 1000 + RISE_TRIAL_WINDOWS * MINUTE;
    const adopted = observeRise(rises, kept, said('b', at), always);
    expect(adopted.raised).toEqual({
      from: { limit: 10, windowSeconds: 60 },
      to: { limit: 20, windowSeconds: 60 },
    });
    expect(adopted.learned).toEqual([
      { limit: 20, windowSeconds: 60, learnedAt: at, by: 'b', raisedFrom: 10 },
    ]);
    expect(adopted.rises).toEqual([]);
  });

  it('R3: a trial whose ring was never full is not adopted', () => {
    let rises = observeRise([], kept, said('a', T0), never).rises;
    rises = observeRise(rises, kept, said('b', T0 + 1000), never).rises;
    expect(observeRise(rises, kept, said('a', T0 + 10 * MINUTE), never).learned).toBeUndefined();
  });

  it('R4: a 429 once the trial may have sent its extra request ends it, blocked an hour; one that cannot be its does not', () => {
    let rises = observeRise([], kept, said('a', T0), never).rises;
    rises = observeRise(rises, kept, said('b', T0 + 1000), never).rises;
    // A liar's 429 while the ring holds no more than the kept limit: not the trial's.
    const fake = observeRise(rises, kept, said('liar', T0 + 2000, 10, true), never, never);
    expect(fake.rises[0]?.trialSince).toBe(T0 + 1000);
    const refused = observeRise(rises, kept, said('a', T0 + 3000, 10, true), never, always);
    expect(refused.rises).toEqual([
      { limit: 10, windowSeconds: 60, seen: [], blockedUntil: T0 + 3000 + RISE_BLOCK_MS },
    ]);
    // Blocked: two callers again start nothing until the hour is over.
    let blocked = observeRise(refused.rises, kept, said('a', T0 + 4000), never).rises;
    blocked = observeRise(blocked, kept, said('b', T0 + 5000), never).rises;
    expect(blocked[0]?.trialSince).toBeUndefined();
    let later = observeRise(blocked, kept, said('a', T0 + 3000 + RISE_BLOCK_MS), never).rises;
    later = observeRise(later, kept, said('b', T0 + 4000 + RISE_BLOCK_MS), never).rises;
    expect(later[0]?.trialSince).toBe(T0 + 4000 + RISE_BLOCK_MS);
  });

  it('a rise of a limit no longer kept is forgotten', () => {
    const rises: RiseState[] = [{ limit: 10, windowSeconds: 60, seen: [{ by: 'a', at: T0, to: 20 }] }];
    expect(observeRise(rises, [], said('c', T0 + 1000), never).rises).toEqual([]);
  });
});

describe('rings a learned class keeps in its item (ledger-state.ts, M3)', () => {
  const limits = rateLimitSettingsSchema.parse({ classes: { reports: [] } });
  const learnedIn = (...windows: number[]) =>
    planFor(limits, { reports: windows.map((windowSeconds) => ({ limit: 5, windowSeconds })) });
  const classRings = (state: ReturnType<typeof emptyState>) =>
    [...state.rings.keys()].filter((key) => key.startsWith('reports/')).sort();

  it('a liar cycling through windows leaves at most the class windows and the probe in the item', () => {
    let state = emptyState();
    let g = T0;
    // The probe, then one window after another as a liar's word would make them, each used once.
    for (const windows of [
      [],
      [10],
      [10, 60],
      [10, 60, 300],
      [15, 60, 300],
      [30, 120, 600],
      [60, 900, 3600],
    ]) {
      const plan = windows.length === 0 ? planFor(limits) : learnedIn(...windows);
      state = stateAt(state, g, plan.marginMs);
      acquire(state, plan, g, 1, 'reports');
      expect(classRings(state).length).toBeLessThanOrEqual(plan.learnedWindows + 1);
      g += 1000;
    }
    expect(classRings(state)).toContain(ringKey('reports', 10_000, 12));
  });

  it('a ring the plan has again starts with what a longer ring of the class holds (T2 of the case tests)', () => {
    const both = learnedIn(15, 60);
    const minuteOnly = learnedIn(60);
    let state = stateAt(emptyState(), T0, both.marginMs);
    // A grant while a tighter limit of the minute held the class: the 15 s ring was not in the plan and is gone.
    acquire(state, minuteOnly, T0, 1, 'reports');
    state.rings.delete(ringKey('reports', 15_000, 12));
    boundClassRings(state, minuteOnly, 'reports');
    state = stateAt(state, T0 + 1000, both.marginMs);
    // Back to both: the 15 s ring holds that grant, so 5 fit, not 6.
    expect(acquire(stateAt(state, T0 + 1000, both.marginMs), both, T0 + 1000, 5, 'reports').granted).toBe(
      false,
    );
    expect(acquire(state, both, T0 + 1000, 4, 'reports').granted).toBe(true);
  });
});
