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
  /** What the class has learned: its kept limits and the reporter's own bound how long counted requests took (I3). */
  learned: readonly LearnedLimit[];
  /**
   * I2: whether the ledger granted a permit of the class lately (within two margins and the validity before the
   * report, by its rings): an answer is to a request a permit let through. Undefined: not known (taken as yes).
   */
  answersAGrant?: boolean;
  /**
   * I3 (b): the latest ledger time at which the oldest of the `n` most recent requests counted by the named limit
   * can have been sent, from the ledger's rings (the general rings only, `generalOnly`, when the limit named is a
   * general one's value: the class's rings do not count what a general limit counts); undefined where they cannot
   * tell.
   */
  oldestSentBy?: (n: number, generalOnly: boolean) => number | undefined;
}

/** Why a report teaches no limit. */
export type IgnoredReport = 'NOT_AN_ANSWER' | 'NO_GRANT' | 'BINDING';

export type EvidenceOutcome = { evidence: ClassEvidence } | { ignored: IgnoredReport };

/**
 * How long the `n` requests a window counts took to make, at least, under other limits of the same requests: the
 * vendor let none through beyond any of its limits, so `n` requests under "l per w" span at least
 * (ceil(n / l) - 2) windows w (fixed windows fill ceil(n / l) windows, of which the first and the last may be cut
 * short; sliding ones span more). I3.
 */
function spanOf(n: number, limits: readonly RateLimit[]): number {
  return Math.max(0, ...limits.map((l) => Math.max(0, Math.ceil(n / l.limit) - 2) * l.windowSeconds * 1000));
}

/** The common window (learned-limits.ts) a lower bound in ms rounds up to. */
const windowOf = (ms: number): number => learnedWindowFor(Math.max(1, Math.ceil(ms / 1000)));

/** The common window after `seconds` (the longest stays the longest). */
const nextWindow = (seconds: number): number =>
  LEARNED_WINDOWS.find((w) => w > seconds) ?? LONGEST_LEARNED_WINDOW;

/**
 * I1-I5: the limit a report names and the window it implies, or why it teaches none.
 * - I2: a report counting nothing (`remaining` ≥ `limit`) is no vendor answer (its own request counts), nor is one
 *   that comes when the ledger granted no permit of the class lately (answersAGrant): no request of the class was
 *   let through to answer.
 * - I3: the window is at least (a) what is certainly left of it plus (c) the span its counted requests took under
 *   the class's other limits that are kept or the reporter's own (one caller's word never lengthens another's
 *   limit for good), for a general limit's value under the general limits alone; and (b) back to the oldest of
 *   them as the ledger's own history places it (one common length beyond a kept limit of the same value at most),
 *   which only one caller's word may hold (keptWindowSeconds).
 * - I4: a reset further ahead than that is the report's own claim: one caller's word (T1, T2), never kept alone,
 *   and a vendor cap holds at most the window it implies (vendor-feedback.ts).
 * - I1: held as tight by a general or configured limit (with the limit as reported): that limit's, nothing new.
 * - I5: above MAX_LEARNED_LIMIT, kept as that.
 */
export function evidenceOf(report: ClassReport, context: EvidenceContext): EvidenceOutcome {
  const { limit, remaining, at, by, refused } = report;
  if (remaining !== undefined && remaining >= limit) return { ignored: 'NOT_AN_ANSWER' };
  if (context.answersAGrant === false) return { ignored: 'NO_GRANT' };
  const live = inForce(context.learned, at);
  const { earliest, latest } = resetInLedgerTime(report.resetSeconds, report.offset);
  const counted = remaining === undefined || !Number.isFinite(remaining) ? 0 : limit - Math.max(0, remaining);
  // A general limit's value: the requests it counts are not all the class's, so only the general limits bound
  // how long they took (an honest 429 of the general hour on a class answer, spanned by the class's own limits,
  // looked like 1000 per two hours).
  const general = context.general.some((g) => g.limit === limit);
  const own = general ? [] : live.filter((l) => l.until === undefined || l.by === by);
  const span = spanOf(counted, [...context.general, ...(general ? [] : context.configured), ...own]);
  const implied = windowOf(earliest - at + span);
  // (b): the counted requests are still counted, so the window reaches back past the oldest of them, as far as
  // the ledger's own history places it. A token's requests sent without a permit make that history older than the
  // vendor's: what it adds is never kept on its own (keptWindowSeconds, T4).
  const sent = counted > 0 ? context.oldestSentBy?.(counted, general) : undefined;
  // Beside a kept limit of the same value, one common length beyond it at most: the kept window is what two callers'
  // resets said; a history much longer than that is another user of the token, not the vendor's window.
  const keptAlike = live.filter(
    (l) => l.until === undefined && l.limit === Math.min(limit, MAX_LEARNED_LIMIT),
  );
  const historyCap =
    keptAlike.length === 0
      ? LONGEST_LEARNED_WINDOW
      : nextWindow(Math.max(...keptAlike.map((l) => l.windowSeconds)));
  const windowSeconds =
    sent === undefined ? implied : Math.max(implied, Math.min(windowOf(earliest - sent), historyCap));
  const binding = [...context.general, ...context.configured];
  if (binding.some((b) => asTight(b, { limit, windowSeconds }))) return { ignored: 'BINDING' };
  return {
    evidence: {
      limit: Math.min(limit, MAX_LEARNED_LIMIT),
      windowSeconds,
      ...(windowSeconds > implied ? { keptWindowSeconds: implied } : {}),
      at,
      by,
      refused,
      resetMs: latest,
    },
  };
}
