import type { RateLimitSettings } from '../config/rate-limits.js';
import type { Telemetry } from '../telemetry.js';
import type { ItemWriter } from './item/index.js';
import { resetInLedgerTime } from './learned-evidence.js';
import { inForce, type LearnedLimit } from './learned-limits.js';
import { learnFromReport, UNMEASURED_OFFSET } from './learned-reports.js';
import { type RiseState, trialLimitOf } from './learned-rise.js';
import type { LearnedStore, LearnedView } from './learned-store.js';
import { ALL_CLASSES, type LedgerState, remainingAt } from './ledger-state.js';
import { type LimitPlan, planFor } from './limit-plan.js';
import { checkTokenId, type LearningInput, vendorReport } from './operations/index.js';
import { callerTag } from './receipts.js';
import type {
  LearnedLimitStatus,
  LedgerUsage,
  VendorFeedbackReport,
  VendorFeedbackResult,
  WindowRemaining,
} from './types.js';
import { usageAt } from './usage.js';
import { checkFeedback } from './validation.js';

/**
 * What the rate ledger is told and what it tells besides permits (DynamoRateLedger's reportVendorFeedback,
 * learned, remaining and usage, dynamo-ledger.ts): a vendor report checked, its class's limit learned from it
 * (learned-reports.ts), and its caps, cooldown and learned ring written through the item's write loop
 * (operations/vendor-report.ts); what a set learned, and what is left of a token's quota. Off a permit's path:
 * dynamo-ledger.ts keeps the acquire and the give-back.
 */

/** What of DynamoRateLedger the reports and the learned status use. */
export interface LedgerCore {
  readonly items: ItemWriter;
  readonly learned: LearnedStore;
  readonly telemetry: Telemetry;
  /** One Region's ledger of two (DynamoRateLedgerOptions.regional). */
  readonly regional: boolean;
  /** The plan for these settings and the set's learned view (cached; `fresh`: read it again). */
  planOf(limits: RateLimitSettings, setId: string | undefined, fresh?: boolean): Promise<RequestPlan>;
  /** The plan of the settings' `base` plan under a learned view. */
  planned(limits: RateLimitSettings, base: LimitPlan, view: LearnedView): RequestPlan;
  /** The time a learned view is read at (ledger time, or the process's clock until that is known). */
  viewTime(base?: LimitPlan): number;
  /** A fresh read moved to the ledger time. */
  readAt(tokenId: string, plan: LimitPlan): Promise<{ state: LedgerState; g: number }>;
  /** The plan `state`'s share holds grants to at g (operations/grant.ts heldBy). */
  held(plan: LimitPlan, state: LedgerState, g: number): LimitPlan;
}

/** The plan of a request: the settings', with the learned classes' rings as the set's view says. */
export interface RequestPlan {
  plan: LimitPlan;
  /** The view's version (0: none, or the plan has no learned class). */
  version: number;
  /** When the view next changes by itself (a provisional limit ends), and the plan then (H2: honest waits). */
  next?: { at: number; plan: LimitPlan } | undefined;
}

/**
 * A learned limit with its rise trial, if one is under way (learned-rise.ts): only a kept limit has one, and a
 * trial's limit is what planIn holds a learned class to meanwhile (R2).
 */
function withTrial(
  limit: LearnedLimit,
  rises: readonly RiseState[] | undefined,
  marginMs: number,
): LearnedLimitStatus {
  const rise = rises?.find(
    (r) => r.limit === limit.limit && r.windowSeconds === limit.windowSeconds && r.trialSince !== undefined,
  );
  if (limit.until !== undefined || rise?.trialSince === undefined || rise.seen.length === 0) return limit;
  return {
    ...limit,
    trial: {
      limit: trialLimitOf(rise, marginMs),
      reportedLimit: Math.min(...rise.seen.map((s) => s.to)),
      since: rise.trialSince,
    },
  };
}

/**
 * What the set learned of its classes' limits, in force now (a fresh read: the operator's status). With the
 * set's `limits` (its margin sizes a trial, R2), each kept limit under a rise trial carries it.
 */
export async function learnedStatus(
  core: LedgerCore,
  setId: string,
  limits?: RateLimitSettings,
): Promise<Record<string, LearnedLimitStatus[]>> {
  const view = await core.learned.view(setId, true);
  const now = core.viewTime();
  const marginMs = limits === undefined ? undefined : planFor(limits).marginMs;
  return Object.fromEntries(
    Object.entries(view.classes)
      .map(
        ([cls, learned]) =>
          [
            cls,
            inForce(learned, now).map((l) =>
              marginMs === undefined ? l : withTrial(l, view.rises[cls], marginMs),
            ),
          ] as const,
      )
      .filter(([, learned]) => learned.length > 0),
  );
}

export async function reportFeedback(
  core: LedgerCore,
  report: VendorFeedbackReport,
): Promise<VendorFeedbackResult | undefined> {
  const { tokenId, plan: base, feedback } = checkFeedback(report);
  // Absolute times, fixed once (at the first attempt, on ledger time): applying the same report again (a
  // retry) changes nothing.
  let at: number | undefined;
  // Who reported: another caller's report may corroborate a long Retry-After (vendor-feedback.ts).
  const reporter = callerTag(report.caller ?? '');
  const offset = report.vendorOffsetMs ?? UNMEASURED_OFFSET;
  // C1: the reset on the vendor's clock, in ledger time at the latest the vendor can mean.
  if (feedback.reset !== undefined) {
    const reset = resetInLedgerTime(feedback.reset, offset);
    feedback.resetMs = reset.latest;
    feedback.resetWidthMs = reset.latest - reset.earliest;
  }
  const learned = await learnFrom(core, tokenId, report, base, feedback, reporter);
  if (learned?.evidence) feedback.classWindowMs = learned.evidence.windowSeconds * 1000;
  const { plan, version, next } = learned?.planned ?? (await core.planOf(report.limits, report.setId));
  // A learned ring that ends before a cap of this report does holds none of it then (vendor-feedback.ts addCap).
  if (next) feedback.planUntil = next.at;
  const learning: LearningInput = {
    plan,
    version,
    seed:
      learned?.evidence && feedback.remaining !== undefined
        ? {
            cls: learned.result.class,
            windowSeconds: learned.evidence.windowSeconds,
            counted: (feedback.limit as number) - feedback.remaining,
            taught: learned.result.limits,
          }
        : undefined,
  };
  const { tightened } = await core.items.apply(tokenId, plan, (state, g, now) => {
    at ??= now;
    const { change, outcome } = vendorReport(state, { plan, at, feedback, reporter, learning }, { g, now });
    return { change, result: outcome };
  });
  core.telemetry.info('rate ledger: vendor feedback', {
    tokenId,
    ...feedback,
    tightened,
    ...(learned ? { learned: learned.result.changed } : {}),
    ...(learned?.result.raised ? { raised: learned.result.raised } : {}),
  });
  return learned ? { learned: learned.result } : {};
}

/**
 * A class report with X-RateLimit-Limit and -Reset may teach its class's limit (docs/class-limits.md), whether
 * the class is learned or configured (for a configured class what is learned is shown and alarmed on, not
 * enforced: the configuration sized its item). It is weighed against the ledger item's own history (one read).
 */
async function learnFrom(
  core: LedgerCore,
  tokenId: string,
  report: VendorFeedbackReport,
  base: LimitPlan,
  feedback: ReturnType<typeof checkFeedback>['feedback'],
  reporter: string,
): Promise<
  | {
      planned: RequestPlan;
      evidence: Awaited<ReturnType<typeof learnFromReport>>['evidence'];
      result: NonNullable<VendorFeedbackResult['learned']>;
    }
  | undefined
> {
  const cls = feedback.class;
  const { setId } = report;
  if (
    cls === undefined ||
    setId === undefined ||
    feedback.limit === undefined ||
    feedback.reset === undefined
  )
    return undefined;
  const { state, g } = await core.readAt(tokenId, base);
  const { view, evidence, result } = await learnFromReport(
    core.learned,
    base,
    {
      setId,
      cls,
      limit: feedback.limit,
      ...(feedback.remaining === undefined ? {} : { remaining: feedback.remaining }),
      reset: feedback.reset,
      refused: feedback.retryAfterSeconds !== undefined,
      by: reporter,
      at: g,
      offset: report.vendorOffsetMs ?? UNMEASURED_OFFSET,
      limits: report.limits,
      wholeHistory: !core.regional,
      ledgerKey: tokenId,
    },
    state,
    g,
  );
  const planned: RequestPlan =
    base.learned.size === 0 ? { plan: base, version: 0 } : core.planned(report.limits, base, view);
  return { planned, evidence, result };
}

/** A fresh read of the item at ledger time g, with the plan its share holds grants to (remaining, usage). */
async function readHeld(
  core: LedgerCore,
  tokenId: string,
  limits: RateLimitSettings,
  setId: string | undefined,
) {
  checkTokenId(tokenId);
  const { plan } = await core.planOf(limits, setId);
  const { state, g } = await core.readAt(tokenId, plan);
  return { state, held: core.held(plan, state, g), g };
}

/** A read, no write: what could be granted at once, per limit of the settings (every class's). */
export async function remainingOf(
  core: LedgerCore,
  tokenId: string,
  limits: RateLimitSettings,
  setId?: string,
): Promise<WindowRemaining[]> {
  const { state, held, g } = await readHeld(core, tokenId, limits, setId);
  return remainingAt(state, held, g, ALL_CLASSES);
}

/** A read, no write: granted and left per limit, and the vendor cooldown (the operator's status). */
export async function usageOf(
  core: LedgerCore,
  tokenId: string,
  limits: RateLimitSettings,
  setId?: string,
): Promise<LedgerUsage> {
  const { state, held, g } = await readHeld(core, tokenId, limits, setId);
  return usageAt(state, held, g);
}
