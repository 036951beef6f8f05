import type { RateLimit } from '../config/rate-limits.js';
import {
  asTight,
  type ClassEvidence,
  inForce,
  LEARNED_WINDOWS,
  type LearnedLimit,
  LONGEST_LEARNED_WINDOW,
  learnedWindowFor,
  MAX_LEARNED_LIMIT,
} from './learned-limits.js';

/**
 * What one class report says of a limit, in ledger time (docs/class-limits.md, "Time" and "What a report says":
 * C1, I1-I5). No I/O: the ledger's own history comes in as a function of the item it read.
 */

/** The vendor's clock minus the ledger's (ms), as an interval that holds the truth (shared/tokens vendorOffsetOf). */
export interface VendorOffset {
  lo: number;
  hi: number;
}

/** A report's X-RateLimit-Reset in ledger time (C1). */
export interface ResetInLedgerTime {
  /** The latest moment the vendor can mean: what caps, holds and provisional ends use. */
  latest: number;
  /** The earliest: what a window's lower bound uses (the header is rounded up to its second). */
  earliest: number;
}

/** C1: a Unix-seconds reset on the vendor's clock, in ledger time on the side that keeps the ledger no looser. */
export const resetInLedgerTime = (resetSeconds: number, offset: VendorOffset): ResetInLedgerTime => ({
  latest: resetSeconds * 1000 - offset.lo,
  earliest: resetSeconds * 1000 - 1000 - offset.hi,
});

/** One class answer's headers, as reported, with who reported it and when. */
export interface ClassReport {
  limit: number;
  /** X-RateLimit-Remaining, when reported. */
  remaining?: number;
  /** X-RateLimit-Reset: Unix seconds on the vendor's clock. */
  resetSeconds: number;
  at: number;
  by: string;
  /** The answer was a 429. */
  refused: boolean;
  offset: VendorOffset;
}

export interface EvidenceContext {
  /** The set's general limits. */
  general: readonly RateLimit[];
  /** The class's configured limits (none for a learned class). */
  configured: readonly RateLimit[];
  /** What the class has learned (kept limits cap a reset, I4; kept and the reporter's own lengthen, I3 c). */
  learned: readonly LearnedLimit[];
  marginMs: number;
  /**
   * I3 (b): the latest ledger time at which the oldest of the `n` most recent requests counted by the named limit
   * can have been sent, from the ledger's rings (the general rings only, `generalOnly`, when the limit named is a
   * general one's value: the class's rings do not count what a general limit counts); undefined where they cannot
   * tell.
   */
  oldestSentBy?: (n: number, generalOnly: boolean) => number | undefined;
}

/** Why a report teaches no limit. */
export type IgnoredReport = 'NOT_AN_ANSWER' | 'BINDING';

export type EvidenceOutcome = { evidence: ClassEvidence } | { ignored: IgnoredReport };

/**
 * How long the `n` requests a window counts took to make, at least, under other limits of the same requests: the
 * vendor let none through beyond any of its limits, so `n` requests under "l per w" span at least
 * (ceil(n / l) - 2) windows w (fixed windows fill ceil(n / l) windows, of which the first and the last may be cut
 * short; sliding ones span more). I3 (c).
 */
function spanOf(n: number, limits: readonly RateLimit[]): number {
  return Math.max(0, ...limits.map((l) => Math.max(0, Math.ceil(n / l.limit) - 2) * l.windowSeconds * 1000));
}

/**
 * I1-I5: the limit a report names and the window it implies, or why it teaches none.
 * - I2: a report counting nothing (`remaining` ≥ `limit`) is no vendor answer (its own request counts).
 * - I3: the window is at least each of (a) what is certainly left of it, (b) from its earliest reset back to the
 *   latest the oldest request it counts can have been sent (the ledger's history), (c) what is certainly left plus
 *   the span its counted requests took under the class's other limits that are kept or the reporter's own (one
 *   caller's word never lengthens another's limit for good). Each is a lower bound for a fixed window and for a
 *   sliding one whose reset is the moment one more fits; a longer window is the tighter limit.
 * - I4: a report naming a kept limit's `limit` lengthens its window by one common length at most through its
 *   reset (a liar's reset a day ahead), further only as far as the ledger's history says.
 * - I1: held as tight by a general or configured limit (with the limit as reported): that limit's, nothing new.
 * - I5: above MAX_LEARNED_LIMIT, kept as that.
 */
export function evidenceOf(report: ClassReport, context: EvidenceContext): EvidenceOutcome {
  const { limit, remaining, at, by, refused } = report;
  if (remaining !== undefined && remaining >= limit) return { ignored: 'NOT_AN_ANSWER' };
  const live = inForce(context.learned, at);
  const clamped = Math.min(limit, MAX_LEARNED_LIMIT);
  const earliest = resetInLedgerTime(report.resetSeconds, report.offset).earliest;
  const counted = remaining === undefined || !Number.isFinite(remaining) ? 0 : limit - Math.max(0, remaining);
  const sent =
    counted > 0
      ? context.oldestSentBy?.(
          counted,
          context.general.some((g) => g.limit === limit),
        )
      : undefined;
  const own = live.filter((l) => l.until === undefined || l.by === by);
  const bounds = [
    earliest - at,
    ...(sent === undefined ? [] : [earliest - sent]),
    earliest - at + spanOf(counted, [...context.general, ...context.configured, ...own]),
  ];
  let windowSeconds = windowOf(Math.max(...bounds));
  // I4: the reset lengthens a kept limit's window by one common length at most; history alone may say more (the
  // oldest counted request was still counted when the vendor answered, at most two margins before the report).
  const named = live.filter((l) => l.until === undefined && l.limit === clamped);
  if (named.length > 0) {
    const kept = Math.max(...named.map((l) => l.windowSeconds));
    const history = sent === undefined ? 0 : windowOf(at - 2 * context.marginMs - sent);
    windowSeconds = Math.max(Math.min(windowSeconds, nextWindow(kept)), history);
  }
  const binding = [...context.general, ...context.configured];
  if (binding.some((b) => asTight(b, { limit, windowSeconds }))) return { ignored: 'BINDING' };
  return { evidence: { limit: clamped, windowSeconds, at, by, refused } };
}

/** The common window (learned-limits.ts) a lower bound in ms rounds up to. */
const windowOf = (ms: number): number => learnedWindowFor(Math.max(1, Math.ceil(ms / 1000)));

/** The common window after `seconds` (the longest stays the longest). */
const nextWindow = (seconds: number): number =>
  LEARNED_WINDOWS.find((w) => w > seconds) ?? LONGEST_LEARNED_WINDOW;
