import { maxHoldSeconds, type ReportKind, ReportLimitedError } from '../report-limits.js';
import type { SetRouteContext } from '../route-context.js';
import type { ReloginGate } from '../token-provider.js';

/**
 * Counts the report against its caller's and its set's limit (shared by all containers). Over either, the
 * report is refused with 429 before anything is read or written for it, and the audit line says which limit.
 */
export async function admitReport(context: SetRouteContext, kind: ReportKind): Promise<void> {
  try {
    await context.services.reports.admit(kind, context.set.id, context.caller.arn);
  } catch (error) {
    if (error instanceof ReportLimitedError) {
      context.audit.decision = `REPORT_LIMITED_${String(error.details?.scope ?? 'caller').toUpperCase()}`;
    }
    throw error;
  }
}

export interface VendorFeedbackFields {
  retryAfterSeconds?: number;
  limit?: number;
  remaining?: number;
  reset?: number;
}

/**
 * Retry-After and reset no later than the set's longest window plus its margin from now (on the vendor's clock, as
 * far ahead of ours as the token's measured offset allows: a reset is a time on its clock): the outer bound. The
 * ledger then holds the set only as long as the report warrants (vendor-feedback.ts): the limit its headers
 * name, a minute for a bare Retry-After, longer only once a second caller reports as much. Clamped rather than
 * refused: the report is the vendor's own header, copied; a real Retry-After of 3700 s still pauses everyone
 * for the whole hour (and the margin) once corroborated, which is all the quota can need, while a day (a
 * consumer's mistake or ill will) cannot stop the set for longer than that. Refusing with 400 would instead
 * drop the true part of the report (there is no room now) and let the next calls hit the vendor's 429 again.
 * The values as reported go to the audit line when capped.
 */
export function capFeedback(
  context: SetRouteContext,
  report: VendorFeedbackFields,
  /** The vendor's clock ahead of ours at most by this (ms): its reset is a time on its clock. */
  vendorAheadMs = 0,
): VendorFeedbackFields {
  const hold = maxHoldSeconds(context.set.rateLimits);
  const capped: VendorFeedbackFields = { ...report };
  if (report.retryAfterSeconds !== undefined && report.retryAfterSeconds > hold) {
    capped.retryAfterSeconds = hold;
    context.audit.reportedRetryAfterSeconds = report.retryAfterSeconds;
  }
  const latestReset = Math.ceil((context.services.clock.now() + Math.max(0, vendorAheadMs)) / 1000 + hold);
  if (report.reset !== undefined && report.reset > latestReset) {
    capped.reset = latestReset;
    context.audit.reportedReset = report.reset;
  }
  return capped;
}

/** The set's bound on re-logins caused by rejection reports, as the token provider asks for it. */
export const reloginGate = (context: SetRouteContext): ReloginGate => ({
  claim: (setId, rejectedTokenId) => context.services.reports.claimRelogin(setId, rejectedTokenId),
});
