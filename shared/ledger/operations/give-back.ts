import type { LedgerState } from '../ledger-state.js';
import {
  consumerTag,
  hasMark,
  type ReceiptClaims,
  receiptIdExpiry,
  SPENT_KEPT,
  SPENT_PER_CALLER,
  signatureHolds,
  spentMark,
} from '../receipts.js';
import { returnGrant, slotIndex } from '../ring.js';
import { type LimitPlan, type RingSpec, ringsFor } from '../ring-plan.js';
import type { NotRecordedReason } from '../types.js';
import type { Applied, At, Outcome } from './outcome.js';

export interface GiveBackInput {
  plan: LimitPlan;
  /** The receipt as parsed: its claims, the signed payload and its signature. */
  claims: ReceiptClaims;
  payload: string;
  mac: string;
  /** Permits given back (at most the receipt's count: validation.ts). */
  count: number;
  /** How long a receipt of this plan can be given back (receipts.ts receiptTtlMs). */
  ttlMs: number;
}

type GiveBackOutcome = Extract<Outcome, { kind: 'given-back' } | { kind: 'receipt-refused' }>;

/**
 * Give-back: unused permits of one grant back to the rings they were counted in, once, named by a receipt this
 * item signed and still young enough; its id joins the spent ids (or, with no place for it, nothing changes).
 */
export function giveBack(state: LedgerState, input: GiveBackInput, { g }: At): Applied<GiveBackOutcome> {
  const { claims, ttlMs } = input;
  const refuse = (problem: 'FORGED' | 'EXPIRED' | 'SPENT', message: string): Applied<GiveBackOutcome> => ({
    change: 'none',
    outcome: { kind: 'receipt-refused', problem, message },
  });
  if (state.secret === undefined || !signatureHolds(state.secret, input.payload, input.mac))
    return refuse('FORGED', 'not issued by this ledger, or altered');
  // Never past its id's own end (signed with it): the spent id is kept exactly that long, whatever the
  // configuration says by the time the receipt comes back.
  if (g >= Math.min(claims.grantedAt + ttlMs, receiptIdExpiry(claims.id)))
    return refuse('EXPIRED', `older than ${ttlMs / 1000} s`);
  const result = returnPermits(state, input.plan, claims, input.count);
  if (result === 'SPENT') return refuse('SPENT', 'already given back');
  return { change: result.notRecorded ? 'none' : 'other', outcome: { kind: 'given-back', result } };
}

/**
 * Why a give-back would find no place among the spent ids (receipts.ts), or undefined when it has one: its
 * caller holds its share (CALLER_SHARE), or the set is full of others' (LEDGER_BUSY). A receipt without its
 * caller's mark (issued by release N-1, during a canary or a rollback) cannot be counted in its caller's share:
 * it is recorded only while two whole shares are left beside it, so that unmarked ids and one caller's share
 * together still leave a share to everyone else.
 */
export function spentPlaceFor(
  spent: ReadonlySet<string>,
  claims: ReceiptClaims,
): NotRecordedReason | undefined {
  const mark = spentMark(claims.caller);
  if (!hasMark(claims.id, mark))
    return spent.size + 1 + 2 * SPENT_PER_CALLER <= SPENT_KEPT ? undefined : 'LEDGER_BUSY';
  if ([...spent].filter((id) => hasMark(id, mark)).length >= SPENT_PER_CALLER) return 'CALLER_SHARE';
  return spent.size < SPENT_KEPT ? undefined : 'LEDGER_BUSY';
}

/**
 * Takes back up to `k` permits of the grant a (verified, unexpired) receipt names, out of the slots they were
 * recorded in, and spends the receipt: its id joins the spent ones. 'SPENT' when it was given back already;
 * `notRecorded` when the spent ids have no place for it (spentPlaceFor): then nothing changes, the receipt is
 * not spent, and its permits age out (the ledger over-counts, which is safe). Vendor caps are not refilled:
 * the vendor may have counted the request anyway (more careful).
 */
export function returnPermits(
  state: LedgerState,
  plan: LimitPlan,
  claims: ReceiptClaims,
  k: number,
): { returned: number; notRecorded?: NotRecordedReason } | 'SPENT' {
  if (state.spent.has(claims.id)) return 'SPENT';
  const notRecorded = spentPlaceFor(state.spent, claims);
  if (notRecorded) return { returned: 0, notRecorded };
  state.spent.add(claims.id);
  if (claims.grantedAt > state.time) return { returned: 0 };
  const count = Math.min(k, claims.count);
  const take = (spec: RingSpec, n: number): number => {
    const ring = state.rings.get(spec.key);
    return ring && n > 0
      ? returnGrant(ring, spec.slotMs, slotIndex(state.time, spec.slotMs), claims.grantedAt, n)
      : 0;
  };
  let returned = 0;
  for (const spec of ringsFor(plan, claims.cls)) {
    // Every ring of the grant gave back the same, unless a slot aged out in one (a longer window keeps it).
    returned = Math.max(returned, take(spec, count));
  }
  // A grant split between a reservation and the shared part (the receipt says how): the shared part first (it
  // was borrowed from everyone), then the reservation. A receipt of a grant made without reservations changes
  // only the rings above, whatever the configuration says now.
  for (const [generalKey, a] of claims.split ?? []) {
    const window = plan.reserved.get(generalKey);
    if (!window) continue;
    const fromShared = Math.min(count, claims.count - a);
    take(window.shared, fromShared);
    const own = claims.consumer
      ? [...window.reserved].find(([name]) => consumerTag(name) === claims.consumer)?.[1]
      : undefined;
    if (own) take(own, Math.min(count - fromShared, a));
  }
  return { returned };
}
