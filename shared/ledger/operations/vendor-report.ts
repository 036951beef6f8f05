import type { LedgerState } from '../ledger-state.js';
import type { LimitPlan } from '../ring-plan.js';
import { applyVendorFeedback, type VendorFeedback } from '../vendor-feedback.js';
import { type LearningInput, learn } from './learning.js';
import type { Applied, At, Outcome } from './outcome.js';

export interface VendorReportInput {
  plan: LimitPlan;
  /** When the report arrived: absolute, fixed at the first attempt, so that applying it again changes nothing. */
  at: number;
  feedback: VendorFeedback;
  /** callerTag of the reporter (another caller's report may corroborate a long Retry-After). */
  reporter: string;
  /** What the report taught (learning.ts), when it taught something. */
  learning: LearningInput;
}

/**
 * Vendor report and cap: a 429's Retry-After becomes a cooldown, a report of what remains a cap on the limit it
 * names (vendor-feedback.ts), and what it taught of a class's limit is learned (learning.ts). Vendor feedback
 * carries absolute times, so applying the same report again changes nothing.
 */
export function vendorReport(
  state: LedgerState,
  input: VendorReportInput,
  { g }: At,
): Applied<Extract<Outcome, { kind: 'reported' }>> {
  const applied = applyVendorFeedback(state, input.plan, g, input.at, input.feedback, input.reporter);
  // Seeding a learned ring tightens the item too (it counts what the vendor counted).
  const { seeded, newer } = learn(state, input.learning, g);
  const tightened = seeded || applied;
  return { change: tightened || newer ? 'other' : 'none', outcome: { kind: 'reported', tightened } };
}
