import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { acquire, emptyState, type LedgerState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import type { LimitPlan } from '../shared/ledger/ring-plan.js';

/**
 * I6 (shared/ledger/item/index.ts): the write loop writes a grant as head additions from what the grant tells it
 * (ledger-state.ts acquire's GrantEffect: the grants recorded per ring, and whether it changed anything else); it
 * does not diff states to find out. So what a grant tells must be exactly what it changed: a grant that says "only
 * these grants" and changed something else would have that change lost by a head addition (a seeded ring, a cap
 * counted down, a new learned version: grants the vendor counted and the ledger then forgets). The oracle here is
 * the diff the loop used to make (issue 34): over random grants on plain, reserved, learned and seeded plans, with
 * vendor caps and learned versions thrown in, every grant that tells only grants differs from the state it was
 * decided on by those grants, in the head slots, and by nothing else.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const settings = rateLimitSettingsSchema.parse({
  general: [
    { limit: 50, windowSeconds: 10 },
    { limit: 300, windowSeconds: 60 },
  ],
  marginSeconds: 0.5,
  permitValiditySeconds: 0.4,
  classes: { reports: [], rebalancing: [{ limit: 8, windowSeconds: 10 }] },
});
const reserved = rateLimitSettingsSchema.parse({
  general: [{ limit: 50, windowSeconds: 10 }],
  marginSeconds: 0.5,
  permitValiditySeconds: 0.4,
  reservations: [{ consumer: 'order-service', perWindow: { 10: 20 } }],
});
const oneWindow = planFor(settings, { reports: [{ limit: 10, windowSeconds: 10 }] });
const twoWindows = planFor(settings, {
  reports: [
    { limit: 10, windowSeconds: 10 },
    { limit: 30, windowSeconds: 60 },
  ],
});
const minuteKey = twoWindows.classes.get('reports')?.find((spec) => spec.windowMs === 60_000)?.key ?? '';
const PLANS: Record<string, LimitPlan> = {
  probe: planFor(settings),
  oneWindow,
  twoWindows,
  // A view without the 10 s ring: back on twoWindows, the 10 s ring is restored from the minute's.
  minuteOnly: planFor(settings, { reports: [{ limit: 30, windowSeconds: 60 }] }),
  // Views cycling through windows (a liar's): past the windows the item is sized for, a ring of the class goes.
  fiveSeconds: planFor(settings, { reports: [{ limit: 6, windowSeconds: 5 }] }),
  halfMinute: planFor(settings, { reports: [{ limit: 15, windowSeconds: 30 }] }),
  quarterHour: planFor(settings, { reports: [{ limit: 100, windowSeconds: 900 }] }),
  // The other Region's first decision on a learned view: the report's count seeds the minute's ring.
  seeded: { ...twoWindows, seeds: new Map([[minuteKey, { n: 12, at: T0 + 4000, v: 3 }]]) },
  reserved: planFor(reserved),
};

/** The state as the loop would diff it: everything but the rings, and each ring's older slots and head. */
function diff(before: LedgerState, after: LedgerState): { other: string[]; heads: Map<string, number> } {
  const other: string[] = [];
  const { rings: _b, ...restBefore } = before;
  const { rings: _a, ...restAfter } = after;
  for (const field of Object.keys({ ...restBefore, ...restAfter }) as (keyof typeof restBefore)[])
    if (JSON.stringify(restBefore[field], replacer) !== JSON.stringify(restAfter[field], replacer))
      other.push(field);
  const heads = new Map<string, number>();
  for (const key of new Set([...before.rings.keys(), ...after.rings.keys()])) {
    const b = before.rings.get(key);
    const a = after.rings.get(key);
    const older = (ring: typeof a) =>
      JSON.stringify([(ring?.counts ?? []).slice(1), (ring?.subs ?? []).slice(1)]).replace(/(,0)+\]/g, ']');
    if (older(b) !== older(a)) other.push(`older slots of ${key}`);
    const added = (a?.counts[0] ?? 0) - (b?.counts[0] ?? 0);
    if (added !== 0) heads.set(key, added);
  }
  return { other, heads };
}
const replacer = (_: string, value: unknown) =>
  value instanceof Set || value instanceof Map ? [...value] : value;

const step = fc.record({
  plan: fc.constantFrom(...Object.keys(PLANS)),
  dtMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 400 }), fc.integer({ min: 400, max: 7000 })),
  k: fc.integer({ min: 1, max: 3 }),
  cls: fc.constantFrom(undefined, 'reports', 'rebalancing'),
  consumer: fc.constantFrom(undefined, 'order-service'),
  // A vendor cap written by a report since, or the item stamped by a newer learned view.
  cap: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  learnedVersion: fc.integer({ min: 0, max: 4 }),
});

/** A grant at g on `state`; a grant that tells only grants is checked against the diff. */
function checkedGrant(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  k: number,
  cls?: string,
  consumer?: string,
): { work: LedgerState; told: 'grants' | 'other' | 'denied' } {
  const before = stateAt(state, g, plan.marginMs);
  const work = stateAt(state, g, plan.marginMs);
  const outcome = acquire(work, plan, g, k, cls, consumer, 'token-a');
  if (!outcome.granted) return { work, told: 'denied' };
  if (outcome.effect.rewrote) return { work, told: 'other' };
  const changed = diff(before, work);
  expect(changed.other).toEqual([]);
  expect(changed.heads).toEqual(outcome.effect.recorded);
  return { work, told: 'grants' };
}

describe('what a grant tells the write loop (I6)', () => {
  it('I6: a ring dropped past the windows the item is sized for (M3) is told: a full write', () => {
    // Rings of 30 s, 60 s and 5 s of the class in the item, then a view of 15 minutes, which no ring restores.
    let state = stateAt(emptyState(), T0, 500);
    const views = ['halfMinute', 'minuteOnly', 'fiveSeconds'] as const;
    views.forEach((name, i) => {
      state = checkedGrant(state, PLANS[name] as LimitPlan, T0 + i * 100, 1, 'reports').work;
    });
    const keys = (s: LedgerState) => [...s.rings.keys()].filter((key) => key.startsWith('reports/')).length;
    expect(keys(state)).toBe(3);
    const { work, told } = checkedGrant(state, PLANS.quarterHour as LimitPlan, T0 + 400, 1, 'reports');
    expect(keys(work)).toBe(3);
    expect(told).toBe('other');
  });

  it('I6: a grant that tells only grants changed exactly those, in the head slots, and nothing else', () => {
    const told = { grants: 0, other: 0 };
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        let state = stateAt(emptyState(), T0, 500);
        for (const { plan: name, dtMs, k, cls, consumer, cap, learnedVersion } of steps) {
          const plan = PLANS[name] as LimitPlan;
          if (cls !== undefined && !plan.classes.has(cls)) continue;
          const g = state.time + dtMs;
          if (cap) state.caps.push({ scope: cls ?? '*', remaining: 5, until: g + 3000 });
          state.learnedVersion = Math.max(state.learnedVersion, learnedVersion);
          const { work, told: kind } = checkedGrant(state, plan, g, k, cls, consumer);
          if (kind !== 'denied') told[kind]++;
          state = work;
        }
      }),
      { numRuns: 150, seed: 20_261_129 },
    );
    // Both kinds were told, so neither side of the check is empty.
    expect(told.grants).toBeGreaterThan(100);
    expect(told.other).toBeGreaterThan(10);
  });
});
