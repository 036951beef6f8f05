/**
 * What a regional ledger had granted per ring at `at` (its ledger time), slot by slot with the slots' start
 * times: enough for another Region to know how many of these grants may still lie in a span ending later
 * (shared/regions/lease.ts, claimOf). Only slots with grants are listed. Ring keys as the LimitPlan names them.
 */
export interface RingSnapshot {
  at: number;
  rings: Record<string, { windowMs: number; slotMs: number; slots: { start: number; count: number }[] }>;
}
