import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { LedgerUnavailableError } from '../shared/ledger/errors.js';
import {
  decodeState,
  encodeState,
  grantAdditions,
  PURGE_SLACK_SECONDS,
} from '../shared/ledger/item/index.js';
import { acquire, emptyState, type LedgerState, stateAt } from '../shared/ledger/ledger-state.js';
import { CAP_UNTIL_MS, parseRingKey, planFor } from '../shared/ledger/limit-plan.js';
import { subSlot, trimRing } from '../shared/ledger/ring.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const limits = rateLimitSettingsSchema.parse({
  itemFormat: 2,
  classes: { reports: [{ limit: 10, windowSeconds: 60 }] },
});
const plan = planFor(limits);

const ringArb = fc
  .array(fc.record({ count: fc.nat({ max: 1500 }), sub: fc.integer({ min: 0, max: 35 }) }), { maxLength: 66 })
  .map((slots) =>
    trimRing({ counts: slots.map((s) => s.count), subs: slots.map((s) => (s.count ? s.sub : 0)) }),
  )
  .filter((ring) => ring.counts.length > 0);
const stateArb = fc
  .record({
    version: fc.integer({ min: 1, max: 1e9 }),
    time: fc.integer({ min: T0, max: T0 + 1e9 }),
    rings: fc.dictionary(
      fc.constantFrom(
        '*/1aao',
        '*/255s0',
        'reports/1aao',
        'rebalancing/255s0',
        'reports/1aao.c',
        'x/255s0.c',
      ),
      ringArb,
    ),
    cooldown: fc.option(fc.integer({ min: 1, max: 1e7 }), { nil: undefined }),
    caps: fc.array(
      fc.record(
        {
          scope: fc.constantFrom('*', 'reports'),
          remaining: fc.nat({ max: 1000 }),
          until: fc.integer({ min: 1, max: 1e7 }),
          windowMs: fc.constantFrom(60_000, 3600_000, 1500, 250),
        },
        { requiredKeys: ['scope', 'remaining', 'until'] },
      ),
      { maxLength: 6 },
    ),
    claim: fc.option(
      fc.record({
        caller: fc.stringMatching(/^[A-Za-z0-9_-]{12}$/),
        seconds: fc.integer({ min: 1, max: 4000 }),
      }),
      { nil: undefined },
    ),
    spent: fc.uniqueArray(
      fc.tuple(fc.integer({ min: 1, max: 1e7 }), fc.stringMatching(/^[A-Za-z0-9_-]{4}$/)),
      { maxLength: 10 },
    ),
    writeIds: fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9_-]{5}$/), { maxLength: 12 }),
    carriedWriteIds: fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9_-]{5}$/), { maxLength: 12 }),
    reservationsKey: fc.option(fc.stringMatching(/^[A-Za-z0-9_-]{8}$/), { nil: undefined }),
    reservationsChangedBefore: fc.option(fc.integer({ min: 0, max: 3_000_000 }), { nil: undefined }),
    secret: fc.option(fc.stringMatching(/^[A-Za-z0-9_-]{22}$/), { nil: undefined }),
  })
  .map(
    (s): LedgerState => ({
      version: s.version,
      time: s.time,
      learnedVersion: 0,
      rings: new Map(Object.entries(s.rings)),
      // Alive at the state's time (a decoded item keeps every id; stateAt prunes the dead ones).
      writeIds: new Set(s.writeIds),
      carriedWriteIds: s.carriedWriteIds,
      reservationsKey: s.reservationsKey ?? '',
      // Within the plan's span before the state's time (older ones are not written: they no longer matter).
      reservationsChangedAt:
        s.reservationsChangedBefore === undefined ? 0 : s.time - s.reservationsChangedBefore,
      spent: new Set(
        s.spent.map(
          ([after, random]) =>
            `${Math.ceil((s.time + after) / 1000)
              .toString(36)
              .padStart(7, '0')}${random}`,
        ),
      ),
      secret: s.secret,
      cooldownUntil: s.cooldown === undefined ? 0 : s.time + s.cooldown,
      // Whole seconds, as claims are kept.
      cooldownClaim:
        s.claim === undefined
          ? undefined
          : { caller: s.claim.caller, until: (Math.floor(s.time / 1000) + s.claim.seconds) * 1000 },
      caps: s.caps.map((cap) => ({ ...cap, until: s.time + cap.until })),
    }),
  );
const normalise = (state: LedgerState) => ({
  ...state,
  rings: [...state.rings]
    .map(([key, ring]) => [key, ring.counts.map((count, j) => (count ? [count, ring.subs[j]] : 0))] as const)
    .filter(([, slots]) => slots.some((slot) => slot !== 0))
    .sort(([a], [b]) => a.localeCompare(b)),
});

describe('ledger item codec', () => {
  it('reads back exactly what it wrote', () => {
    fc.assert(
      fc.property(stateArb, (state) => {
        const stored = encodeState(state, plan.maxSpanMs);
        expect(normalise(decodeState(stored, state.time))).toEqual(normalise(state));
      }),
    );
  });

  it('reads back exactly what it wrote in item format 2 (packed), the heads dated by the latest head addition', () => {
    fc.assert(
      fc.property(stateArb, fc.option(fc.nat({ max: 999 }), { nil: undefined }), (state, offset) => {
        const stored = encodeState(state, plan.maxSpanMs, 2);
        expect(stored.format).toBe(2);
        expect(stored.rings).toBeUndefined();
        const decoded = decodeState({ ...stored, headOffset: offset }, state.time);
        // A head's latest grant is dated by the full write's time, or the latest head addition after it.
        for (const [key, ring] of decoded.rings) {
          if (!ring.counts[0]) continue;
          const { slotMs } = parseRingKey(key);
          const headEnd = (Math.floor(state.time / slotMs) + 1) * slotMs - 1;
          expect(ring.subs[0]).toBe(subSlot(Math.min(state.time + (offset ?? 0), headEnd), slotMs));
          ring.subs[0] = state.rings.get(key)?.subs[0] ?? 0;
        }
        // A cap's end is kept in 10 ms after the item's time, rounded up: it never ends sooner.
        const capsKept = state.caps.map((cap) => ({
          ...cap,
          until: state.time + Math.ceil((cap.until - state.time) / CAP_UNTIL_MS) * CAP_UNTIL_MS,
        }));
        expect(normalise(decoded)).toEqual(normalise({ ...state, caps: capsKept }));
      }),
    );
  });

  it('sets the purge time past everything that still matters, plus slack', () => {
    const state = { ...emptyState(3), time: T0, cooldownUntil: T0 + 7200_000 };
    expect(encodeState(state, plan.maxSpanMs).purgeAt).toBe((T0 + 7200_000) / 1000 + PURGE_SLACK_SECONDS);
    expect(encodeState({ ...state, cooldownUntil: 0 }, plan.maxSpanMs).purgeAt).toBe(
      (T0 + 3600_000 + plan.marginMs) / 1000 + PURGE_SLACK_SECONDS,
    );
  });

  it('ignores an item past its purge time but keeps its version (writes stay conditional on it)', () => {
    const stored = encodeState(
      { ...emptyState(9), time: T0, rings: new Map([['*/1aao', { counts: [5], subs: [3] }]]) },
      plan.maxSpanMs,
    );
    expect(decodeState(stored, stored.purgeAt * 1000)).toEqual(emptyState(9));
    expect(decodeState(stored, stored.purgeAt * 1000 - 1).rings.get('*/1aao')).toEqual({
      counts: [5],
      subs: [3],
    });
  });

  it.each([
    ['a ring', { rings: '*/1aao=z1e,,x' }],
    ['a ring key', { heads: { 'no-slash': 3 } }],
    ['a head', { heads: { '*/1aao': -1 } }],
    ['a cap', { caps: '*:1:' }],
    ['the version', { version: 0 }],
  ])('fails closed on an unreadable item (%s)', (_, broken) => {
    const stored = { ...encodeState({ ...emptyState(2), time: T0 }, plan.maxSpanMs), ...broken };
    expect(() => decodeState(stored, T0)).toThrow(LedgerUnavailableError);
  });
});

describe('head additions (concurrent grants in one slot)', () => {
  const base = (): LedgerState => {
    const state = stateAt(emptyState(4), T0, plan.marginMs);
    acquire(state, plan, T0, 30, undefined);
    return state;
  };
  /** A grant on `read` at g, and the head additions the write loop makes of what it told (I6). */
  const additionsOf = (read: LedgerState, g: number, k: number, cls?: string) => {
    const work = stateAt(read, g, plan.marginMs);
    const outcome = acquire(work, plan, g, k, cls);
    if (!outcome.granted) throw new Error('the grant was denied');
    if (outcome.effect.rewrote) return undefined;
    return grantAdditions(read, work, outcome.effect.recorded, [plan], g);
  };

  it('I6: turns grants in the same slots into guarded additions', () => {
    const read = base();
    // The class's ring has coarser slots (item format 2: 12 a window): its own sub-slot.
    const reports = plan.classes.get('reports')?.[0];
    expect(reports?.key).toBe('reports/1aao.c');
    expect(additionsOf(read, T0 + 500, 5, 'reports')).toEqual([
      { key: '*/1aao', add: 5, max: 50 - 5, sub: 18 },
      { key: '*/255s0', add: 5, max: 1000 - 5, sub: 0 },
      { key: 'reports/1aao.c', add: 5, max: 10 - 5, sub: subSlot(T0 + 500, reports?.slotMs ?? 0) },
    ]);
  });

  it('leaves room only beside the older slots that still count', () => {
    const older = stateAt(emptyState(4), T0, plan.marginMs);
    acquire(older, plan, T0, 20, undefined);
    const read = stateAt(older, T0 + 2000, plan.marginMs);
    acquire(read, plan, T0 + 2000, 1, undefined);
    expect(additionsOf(read, T0 + 2100, 4)?.[0]).toEqual({
      key: '*/1aao',
      add: 4,
      max: 50 - 20 - 4,
      sub: 3,
    });
  });

  it('I6: needs a full write when a slot changes, a cap is in force, or the item does not exist yet', () => {
    const read = base();
    expect(additionsOf(read, T0 + 1000, 1)).toBeUndefined();
    const capped = { ...read, caps: [{ scope: '*', remaining: 9, until: T0 + 9000 }] };
    expect(additionsOf(capped, T0 + 10, 1)).toBeUndefined();
    const fresh = stateAt(emptyState(), T0, plan.marginMs);
    expect(additionsOf(fresh, T0, 1)).toBeUndefined();
    // The grant itself tells the loop it changed more than its grants: a cap counted down.
    const work = stateAt(capped, T0 + 10, plan.marginMs);
    expect(acquire(work, plan, T0 + 10, 1, undefined)).toMatchObject({
      granted: true,
      effect: { rewrote: true },
    });
  });
});
