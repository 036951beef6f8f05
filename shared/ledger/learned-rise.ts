import type { RateLimit } from '../config/rate-limits.js';
import type { ClassEvidence, LearnedLimit } from './learned-limits.js';

/**
 * Limits that rise (docs/class-limits.md, R1-R4), no I/O. A kept limit is never loosened by what callers say:
 * two callers reporting a larger limit over its window only start a bounded probe above it (the class held a
 * little above the kept limit), and the larger limit is adopted once demand kept that probe full for a window, a
 * few windows into it, without a 429 of the class: held at its pace, the probe lets more through than the old
 * limit allows in some window (trialLimitOf), so the vendor would have refused if the old limit still held. The
 * ledger item's rings tell whether the probe was full (trialFull) or may have sent its extra request lately
 * (trialMaySend).
 */

/** A rise candidate or trial of one kept limit of a class. */
export interface RiseState {
  /** The kept limit it is about. */
  limit: number;
  windowSeconds: number;
  /**
   * Distinct callers' latest reports of a larger limit over a window no longer than this one's (R1), each kept for
   * two windows (callers taking turns at the limit answer a window and a margin apart).
   */
  seen: { by: string; at: number; to: number }[];
  /** R2: the trial began then (ledger time). */
  trialSince?: number;
  /** R3: a report first found the trial's ring full then (ledger time). */
  fullSince?: number;
  /** R4: no new trial of this limit before then. */
  blockedUntil?: number;
}

/** Per class. */
export type Rises = Record<string, RiseState[]>;

/** Callers whose reports start a trial (R1): one liar cannot. */
export const RISE_CALLERS = 2;
/** R3: a trial lasts at least this many windows of its limit, and its ring was full at least one window before. */
export const RISE_TRIAL_WINDOWS = 3;
/** R4: after a refused trial, none of that limit for this long. */
export const RISE_BLOCK_MS = 3_600_000;

/**
 * The limit a trial holds the class to (R2): one more a window than the kept limit lets through at its ring's pace
 * (a ring of `limit` per window widened by the margin lets `limit` per window and margin through; fewer than one
 * more would never reach the vendor's limit, and a limit that did not rise would go unrefused).
 */
export const trialLimitOf = (kept: RateLimit, marginMs: number): number =>
  kept.limit + 1 + Math.floor((kept.limit * marginMs) / (kept.windowSeconds * 1000));

/** The trials in force of a class: for learnedRingLimits. */
export const trialsOf = (
  rises: readonly RiseState[] | undefined,
  marginMs: number,
): { limit: number; windowSeconds: number; trialLimit: number }[] =>
  (rises ?? [])
    .filter((r) => r.trialSince !== undefined)
    .map((r) => ({ limit: r.limit, windowSeconds: r.windowSeconds, trialLimit: trialLimitOf(r, marginMs) }));

export interface RiseOutcome {
  rises: RiseState[];
  /** R3: the kept limits after an adoption (undefined: unchanged). */
  learned?: LearnedLimit[];
  raised?: { from: RateLimit; to: RateLimit };
  changed: boolean;
}

/**
 * R4: a 429 of the class ends every trial of it that may have sent its extra request (a 429 that cannot be the
 * trial's, one caller's word, does not end it: the class is held by it as by any 429, H1). Whether one ended.
 */
function endTrials(rises: RiseState[], at: number, trialMaySend: (rise: RiseState) => boolean): boolean {
  let changed = false;
  for (const r of rises)
    if (r.trialSince !== undefined && trialMaySend(r)) {
      delete r.trialSince;
      delete r.fullSince;
      r.seen = [];
      r.blockedUntil = at + RISE_BLOCK_MS;
      changed = true;
    }
  return changed;
}

/**
 * R3: a trial that lasted its windows, full for one of them and not refused, is adopted (`adopted`: the outcome);
 * a trial first seen full is marked so (`changed`).
 */
function runTrials(
  rises: RiseState[],
  learned: readonly LearnedLimit[],
  { at, by }: ClassEvidence,
  trialFull: (rise: RiseState) => boolean,
): { changed: boolean; adopted?: RiseOutcome } {
  let changed = false;
  for (const r of rises) {
    if (r.trialSince === undefined) continue;
    if (r.fullSince === undefined && trialFull(r)) {
      r.fullSince = at;
      changed = true;
    }
    const windowMs = r.windowSeconds * 1000;
    if (
      at - r.trialSince < RISE_TRIAL_WINDOWS * windowMs ||
      r.fullSince === undefined ||
      at - r.fullSince < windowMs
    )
      continue;
    const to = Math.min(...r.seen.map((s) => s.to));
    const next = learned
      .filter((l) => !(l.until === undefined && l.limit === r.limit && l.windowSeconds === r.windowSeconds))
      .concat({ limit: to, windowSeconds: r.windowSeconds, learnedAt: at, by, raisedFrom: r.limit });
    return {
      changed: true,
      adopted: {
        rises: rises.filter((o) => o !== r),
        learned: next,
        raised: {
          from: { limit: r.limit, windowSeconds: r.windowSeconds },
          to: { limit: to, windowSeconds: r.windowSeconds },
        },
        changed: true,
      },
    };
  }
  return { changed };
}

/**
 * One report's part in the rises of its class: `learned` is the class's list, `evidence` what the report says
 * (learned-evidence.ts), `trialFull(rise)` whether the trial's ring holds its trial limit now (demand keeps the
 * probe above full, R3), `trialMaySend(rise)` whether it may have sent its extra request lately (a refused answer
 * ends the trial only then, R4).
 */
export function observeRise(
  current: readonly RiseState[],
  learned: readonly LearnedLimit[],
  evidence: ClassEvidence,
  trialFull: (rise: RiseState) => boolean,
  trialMaySend: (rise: RiseState) => boolean = () => true,
): RiseOutcome {
  const { at, by } = evidence;
  const kept = learned.filter((l) => l.until === undefined);
  const keptOf = (r: RateLimit) =>
    kept.find((l) => l.limit === r.limit && l.windowSeconds === r.windowSeconds);
  // Rises of limits no longer kept, and blocks that ended, go.
  const rises = current
    .filter(
      (r) => keptOf(r) && (r.blockedUntil === undefined || r.blockedUntil > at || r.trialSince !== undefined),
    )
    .map((r) => ({
      ...r,
      seen: r.seen.filter((s) => r.trialSince !== undefined || at - s.at <= 2 * r.windowSeconds * 1000),
    }));
  let changed = rises.length !== current.length;
  if (evidence.refused) return { rises, changed: endTrials(rises, at, trialMaySend) || changed };
  const trials = runTrials(rises, learned, evidence, trialFull);
  if (trials.adopted) return trials.adopted;
  changed = trials.changed || changed;
  // R1: a larger limit over a window no longer than a kept one's is evidence of that one's rise.
  const target = kept
    .filter((l) => l.limit < evidence.limit && evidence.windowSeconds <= l.windowSeconds)
    .sort((a, b) => a.windowSeconds - b.windowSeconds)[0];
  if (!target) return { rises, changed };
  let rise = rises.find((r) => r.limit === target.limit && r.windowSeconds === target.windowSeconds);
  if (rise?.blockedUntil !== undefined && rise.blockedUntil > at) return { rises, changed };
  if (!rise) {
    rise = { limit: target.limit, windowSeconds: target.windowSeconds, seen: [] };
    rises.push(rise);
  }
  delete rise.blockedUntil;
  // A caller's word is written again only when half a window old (a report per vendor window would otherwise
  // write the learned item, and make every process read it again, at every report).
  const mine = rise.seen.find((s) => s.by === by);
  if (mine && at - mine.at < rise.windowSeconds * 500 && mine.to <= evidence.limit) return { rises, changed };
  rise.seen = [...rise.seen.filter((s) => s.by !== by), { by, at, to: evidence.limit }].slice(-4);
  if (rise.trialSince === undefined && new Set(rise.seen.map((s) => s.by)).size >= RISE_CALLERS)
    rise.trialSince = at;
  return { rises, changed: true };
}
