import type { RateLimitSettings } from '../config/rate-limits.js';
import { type ClassReport, type EvidenceContext, evidenceOf, type VendorOffset } from './learned-evidence.js';
import { grantsAfter, oldestSentBy, ringKeysOf } from './learned-history.js';
import {
  type ClassEvidence,
  inForce,
  type LearnedLimit,
  learnedRingLimits,
  nextEnd,
  type TeachOptions,
  teach,
} from './learned-limits.js';
import { seedKeyOf } from './learned-rings.js';
import { observeRise, type RiseState, trialLimitOf, trialsOf } from './learned-rise.js';
import type { LearnedSeed, LearnedStore, LearnedView, Seeds } from './learned-store.js';
import type { LedgerState } from './ledger-state.js';
import { GENERAL_SCOPE, type LearnedRings, type LimitPlan, parseRingKey, planFor } from './limit-plan.js';
import type { VendorFeedbackResult } from './types.js';

/**
 * Where the learning rules meet the stores (docs/class-limits.md): a class report, with the ledger item's state
 * it was read against, becomes a change of the set's learned item; and a set's learned view becomes the plan a
 * permit is decided on. The rules are in learned-limits.ts, learned-evidence.ts and learned-rise.ts.
 */

/**
 * The vendor's clock offset when a report carries none: the ledger's own (a tool or a test on one clock). The vend
 * route always passes the token's (shared/tokens vendorOffsetOf, with its fallbacks for tokens that have none:
 * docs/class-limits.md, C3).
 */
export const UNMEASURED_OFFSET: VendorOffset = { lo: 0, hi: 0 };

/** The plan for these settings with the learned classes' rings as `view` says at `now` (trials included). */
export function planIn(
  limits: RateLimitSettings,
  base: LimitPlan,
  view: LearnedView,
  now: number,
): LimitPlan {
  const rings: Record<string, RateLimitSettings['general']> = {};
  for (const cls of base.learned)
    rings[cls] = learnedRingLimits(
      view.classes[cls],
      limits.general,
      now,
      trialsOf(view.rises[cls], base.marginMs),
    ) as RateLimitSettings['general'];
  const plan = planFor(limits, rings as LearnedRings);
  // The seeds still within their ring's span (past it, the cached plan as before).
  const seeds = new Map<string, { n: number; at: number; v: number; k?: string }>();
  for (const cls of base.learned)
    for (const seed of view.seeds?.[cls] ?? []) {
      const spec = plan.classes.get(cls)?.find((s) => s.windowMs === seed.w * 1000);
      if (spec && now < seed.at + spec.spanMs) seeds.set(spec.key, seed);
    }
  return seeds.size > 0 ? { ...plan, seeds } : plan;
}

/**
 * H2: when the learned view next changes by itself (a provisional limit ends) after `now`, and the plan then:
 * a denial's wait is the earlier of when the current plan fits the ask and when that one does.
 */
export function nextPlanIn(
  limits: RateLimitSettings,
  base: LimitPlan,
  view: LearnedView,
  now: number,
): { at: number; plan: LimitPlan } | undefined {
  if (base.learned.size === 0) return undefined;
  const at = nextEnd(Object.fromEntries([...base.learned].map((cls) => [cls, view.classes[cls] ?? []])), now);
  return Number.isFinite(at) ? { at, plan: planIn(limits, base, view, at) } : undefined;
}

/**
 * The seeds after a write at ledger time `at` (learned-store.ts `sd`): a taught window's count (`seed`, when the
 * report taught a limit and said what remained) replaces that window's; a class's seeds are kept only for windows
 * it holds a limit of, and while the vendor's window of their report and a span's margin can still hold what they
 * counted (so the item stays within a seed per kept window).
 */
function seedsAfter(
  seeds: Seeds,
  cls: string,
  learned: readonly LearnedLimit[],
  at: number,
  marginMs: number,
  seed: Partial<LearnedSeed>,
): Seeds {
  const out: Seeds = {};
  for (const [name, list] of Object.entries(seeds)) {
    const kept = list.filter(
      (s) =>
        s.at + s.w * 1000 + 2 * marginMs > at &&
        (name !== cls || (s.w !== seed.w && learned.some((l) => l.windowSeconds === s.w))),
    );
    if (kept.length > 0) out[name] = kept;
  }
  if (seed.w !== undefined) out[cls] = [...(out[cls] ?? []), seed as LearnedSeed];
  return out;
}

/**
 * One report against a class's list, no I/O: what it says (I1-I5) and the list after the trust rules (undefined:
 * no change; `evidence` undefined: it teaches no limit).
 */
export function teachReport(
  current: readonly LearnedLimit[],
  report: ClassReport,
  context: Omit<EvidenceContext, 'learned'> & TeachOptions,
): { evidence?: ClassEvidence; next?: LearnedLimit[] } {
  const outcome = evidenceOf(report, { ...context, learned: current });
  if (!('evidence' in outcome)) return {};
  const next = teach(current, outcome.evidence, context);
  return { evidence: outcome.evidence, ...(next ? { next } : {}) };
}

export interface ClassReportInput {
  setId: string;
  cls: string;
  limit: number;
  remaining?: number;
  /** Unix seconds on the vendor's clock. */
  reset: number;
  refused: boolean;
  /** callerTag of the reporter. */
  by: string;
  at: number;
  offset: VendorOffset;
  limits: RateLimitSettings;
  /** The ledger item holds every grant of the token (not a regional ledger's part): I3 (b) may read it. */
  wholeHistory: boolean;
  /** The ledger key (token) the report is of: its seed seeds that key's items only. */
  ledgerKey?: string;
}

export interface Learning {
  view: LearnedView;
  /** What the report said of a limit (undefined: it taught none, I1 or I2). */
  evidence?: ClassEvidence;
  result: NonNullable<VendorFeedbackResult['learned']>;
}

/** What teachReport weighs a report against: the settings and the ledger item's history of the token (`state` at `g`). */
function evidenceContext(base: LimitPlan, report: ClassReportInput, state: LedgerState, g: number) {
  const { cls } = report;
  // I2: an answer is to a request a permit let through, granted at most the validity and two margins (the request's
  // trip, its answer's and the report's) before the report.
  const lately = g - base.validityMs - 2 * base.marginMs;
  const general = ringKeysOf(state, GENERAL_SCOPE);
  return {
    general: report.limits.general,
    configured: report.limits.classes[cls] ?? [],
    marginMs: base.marginMs,
    answersAGrant: ringKeysOf(state, cls).some((key) => grantsAfter(state, key, g, lately) > 0),
    // The ledger's history of the token is all of it only when no other ledger grants for it: a Region's of two
    // holds its own part, and would take the other Region's requests for a longer window.
    ...(report.wholeHistory
      ? {
          oldestSentBy: (n: number, generalOnly: boolean) =>
            oldestSentBy(
              state,
              generalOnly ? general : [...general, ...ringKeysOf(state, cls)],
              g,
              n,
              base.validityMs,
            ),
        }
      : {}),
  };
}

/** The rises' questions to the ledger item's history of class `cls` (learned-rise.ts, observeRise). */
function trialChecks(base: LimitPlan, cls: string, state: LedgerState, g: number) {
  const ringOfWindow = (seconds: number): string | undefined =>
    ringKeysOf(state, cls).find((key) => parseRingKey(key).windowMs === seconds * 1000);
  const trialFull = (rise: RiseState): boolean => {
    const key = ringOfWindow(rise.windowSeconds);
    // The trial's ring held its trial limit in its span, lately: demand keeps the probe full. Over all it keeps
    // (its span and a slot): a report comes once per vendor window, at the first answer of one, often the first
    // grant after the ring let the last span's grants go, which it still holds in its oldest slots.
    const spec = key === undefined ? undefined : parseRingKey(key);
    const after = g - rise.windowSeconds * 1000 - base.marginMs - (spec?.slotMs ?? 0);
    return key !== undefined && grantsAfter(state, key, g, after) >= trialLimitOf(rise, base.marginMs);
  };
  const trialMaySend = (rise: RiseState): boolean => {
    const key = ringOfWindow(rise.windowSeconds);
    // Its extra request may be among the class's grants of the last window and two margins (an upper bound).
    const after = g - rise.windowSeconds * 1000 - 2 * base.marginMs;
    return key !== undefined && grantsAfter(state, key, g, after) > rise.limit;
  };
  return { trialFull, trialMaySend };
}

/**
 * Applies a class report to the set's learned item: the evidence (against the ledger item's history, `state` at
 * `g`), the trust rules and the rises, in one conditional write of the learned item (again on a conflict).
 */
export async function learnFromReport(
  store: LearnedStore,
  base: LimitPlan,
  report: ClassReportInput,
  state: LedgerState,
  g: number,
): Promise<Learning> {
  const { cls, at, by } = report;
  const context = evidenceContext(base, report, state, g);
  const { trialFull, trialMaySend } = trialChecks(base, cls, state, g);
  let evidence: ClassEvidence | undefined;
  let limitsChanged = false;
  let raised: NonNullable<VendorFeedbackResult['learned']>['raised'];
  const { view } = await store.update(report.setId, ({ classes, rises, seeds = {} }, version) => {
    const current = classes[cls] ?? [];
    const taught = teachReport(
      current,
      {
        limit: report.limit,
        ...(report.remaining === undefined ? {} : { remaining: report.remaining }),
        resetSeconds: report.reset,
        at,
        by,
        refused: report.refused,
        offset: report.offset,
      },
      { ...context, maxWindows: base.learnedWindows },
    );
    evidence = taught.evidence;
    if (!evidence) return undefined;
    const rise = observeRise(rises[cls] ?? [], taught.next ?? current, evidence, trialFull, trialMaySend);
    raised = rise.raised;
    limitsChanged = taught.next !== undefined || rise.learned !== undefined;
    if (!limitsChanged && !rise.changed) return undefined;
    const nextRises = { ...rises, [cls]: rise.rises };
    if (rise.rises.length === 0) delete nextRises[cls];
    const learned = rise.learned ?? taught.next ?? current;
    return {
      classes: { ...classes, [cls]: learned },
      rises: nextRises,
      seeds: seedsAfter(seeds, cls, learned, at, base.marginMs, {
        ...(taught.next && report.remaining !== undefined
          ? {
              w: evidence.windowSeconds,
              n: Math.max(0, report.limit - report.remaining),
              at,
              v: version,
              ...(report.ledgerKey === undefined ? {} : { k: seedKeyOf(report.ledgerKey) }),
            }
          : {}),
      }),
    };
  });
  return {
    view,
    ...(evidence ? { evidence } : {}),
    result: {
      class: cls,
      limits: inForce(view.classes[cls], at),
      changed: limitsChanged,
      ...(raised ? { raised } : {}),
    },
  };
}
