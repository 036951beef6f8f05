import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { acquire, emptyState, type LedgerState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { returnPermits as giveBack } from '../shared/ledger/operations/give-back.js';
import {
  callerTag,
  hasMark,
  newReceiptId,
  type ReceiptClaims,
  receiptTtlMs,
  SPENT_KEPT,
  SPENT_LIMIT,
  SPENT_PER_CALLER,
  spentMark,
} from '../shared/ledger/receipts.js';

/**
 * The pure core's places for spent receipt ids (receipts.ts): a caller's share, the whole set, and receipts of
 * release N-1 (no mark). A give-back without a place changes nothing: no permit back, the receipt not spent.
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const plan = planFor(rateLimitSettingsSchema.parse({}));
/** Release N-1's check of a spent id (shared/ledger/receipts.ts at 668d70e): every id written must pass it. */
const N_MINUS_1_RECEIPT_ID = /^[0-9a-z]{7}[A-Za-z0-9_-]{4}$/;

function grant(state: LedgerState, caller: string | undefined, g = T0): ReceiptClaims {
  const outcome = acquire(state, plan, g, 1, undefined);
  if (!outcome.granted) throw new Error('the test grants within the limits');
  const tag = callerTag(caller ?? 'n-1 caller');
  // A receipt of release N-1 has no caller mark: four random characters.
  const id = newReceiptId(g + receiptTtlMs(plan), caller === undefined ? undefined : tag, state.spent);
  return { key: 'token', cls: undefined, count: 1, grantedAt: g, caller: tag, id };
}

const copy = (state: LedgerState): LedgerState => stateAt(state, state.time, plan.marginMs);
const minuteUsed = (state: LedgerState) => state.rings.get(plan.general[0]?.key ?? '')?.counts[0] ?? 0;

describe('places for spent receipt ids', () => {
  it('receipt ids carry their caller mark and keep the shape release N-1 reads', () => {
    const tag = callerTag('arn:aws:iam::123456789012:role/portfolio-service');
    const ids = Array.from({ length: 200 }, () => newReceiptId(T0 + 5000, tag));
    for (const id of ids) {
      expect(id).toMatch(N_MINUS_1_RECEIPT_ID);
      expect(hasMark(id, spentMark(tag))).toBe(true);
    }
    expect(newReceiptId(T0 + 5000)).toMatch(N_MINUS_1_RECEIPT_ID);
    // The random part tells them apart (12 bits beside the mark: 200 ids of one caller share about 4.9 pairs,
    // and 20 or more, which this would refuse, come in about one run in six million; 190 failed about one in 40), and a
    // new id is never one already spent.
    expect(new Set(ids).size).toBeGreaterThanOrEqual(180);
    const spent = new Set(ids.slice(0, 10));
    for (let i = 0; i < 500; i++) expect(spent.has(newReceiptId(T0 + 5000, tag, spent))).toBe(false);
  });

  it("gives each caller at most its share, and never fills the set to release N-1's limit", () => {
    const state = stateAt(emptyState(), T0, plan.marginMs);
    state.time = T0;
    const a = Array.from({ length: SPENT_PER_CALLER + 1 }, () => grant(state, 'a'));
    for (const claims of a.slice(0, SPENT_PER_CALLER))
      expect(giveBack(state, plan, claims, 1)).toEqual({ returned: 1 });
    // Over its share: nothing changes, the receipt stays unspent.
    const before = copy(state);
    const over = a[SPENT_PER_CALLER] as ReceiptClaims;
    expect(giveBack(state, plan, over, 1)).toEqual({ returned: 0, notRecorded: 'CALLER_SHARE' });
    expect([state.spent, minuteUsed(state)]).toEqual([before.spent, minuteUsed(before)]);
    expect(state.spent.has(over.id)).toBe(false);
    // Others still have their own shares, until the set holds SPENT_KEPT.
    for (const caller of ['b', 'c'])
      for (let i = 0; i < SPENT_PER_CALLER; i++)
        expect(giveBack(state, plan, grant(state, caller), 1)).toEqual({ returned: 1 });
    expect(state.spent.size).toBe(SPENT_KEPT);
    expect(SPENT_KEPT).toBeLessThan(SPENT_LIMIT);
    expect(giveBack(state, plan, grant(state, 'd'), 1)).toEqual({ returned: 0, notRecorded: 'LEDGER_BUSY' });
    expect(state.spent.size).toBe(SPENT_KEPT);
    // Once the spent ids expire, their places are free again: `over` is recorded now.
    const later = stateAt(state, T0 + receiptTtlMs(plan) + 1000, plan.marginMs);
    expect(later.spent.size).toBe(0);
    // (The core takes any receipt it is given; the adapter refuses expired ones before.)
    expect(giveBack(later, plan, over, 1)).toEqual({ returned: 1 });
    expect(later.spent.has(over.id)).toBe(true);
  });

  it('records receipts of release N-1 (no caller mark) only while two whole shares are left beside them', () => {
    const state = stateAt(emptyState(), T0, plan.marginMs);
    state.time = T0;
    let recorded = 0;
    for (let i = 0; i < SPENT_KEPT; i++) {
      const outcome = giveBack(state, plan, grant(state, undefined), 1);
      if (typeof outcome === 'object' && !outcome.notRecorded) recorded++;
      else expect(outcome).toEqual({ returned: 0, notRecorded: 'LEDGER_BUSY' });
    }
    expect(recorded).toBe(SPENT_KEPT - 2 * SPENT_PER_CALLER);
    // Whoever gave those back, and one more caller with its whole share, leave another caller its whole share.
    for (const caller of ['e', 'f'])
      for (let i = 0; i < SPENT_PER_CALLER; i++)
        expect(giveBack(state, plan, grant(state, caller), 1)).toEqual({ returned: 1 });
    expect(state.spent.size).toBe(SPENT_KEPT);
  });
});
