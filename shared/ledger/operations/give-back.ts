import { type LedgerState, giveBack as returnPermits } from '../ledger-state.js';
import { type ReceiptClaims, receiptIdExpiry, signatureHolds } from '../receipts.js';
import type { LimitPlan } from '../ring-plan.js';
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
