import type { RateLimit } from '../config/rate-limits.js';

/**
 * Learned class limits (docs/class-limits.md): the rules, no I/O. A class configured with no limits
 * (`rateLimits.classes.<name> = []`) is held to a probe until the vendor's X-RateLimit-* headers on one of its
 * answers tell its limit; then to what they told, never looser than they said.
 */

/** Until a class's first limit is learned: at most one grant in any span of this window (plus the margin). */
export const PROBE_LIMIT: RateLimit = { limit: 1, windowSeconds: 10 };
/**
 * The most a denial on the probe tells a caller to wait: the answer to the one request the probe let through
 * teaches the class's limits within a round trip, so the next ask should not wait out the probe's whole span.
 */
export const PROBE_RETRY_MS = 1000;
/** Limits a class keeps at once (a vendor family may have a minute's and an hour's). */
export const MAX_LEARNED_PER_CLASS = 2;
/**
 * The largest learned limit kept exactly; a larger one is kept as this (lower: safe). The ledger item is sized
 * for every learned class at this limit (limit-plan.ts), and three learned classes fit one write unit at the vendor's default general limits.
 */
export const MAX_LEARNED_LIMIT = 400;
/** Learned windows are rounded UP to one of these (seconds): the vendor's headers carry no window length. */
export const LEARNED_WINDOWS = [
  1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400,
] as const;
export const LONGEST_LEARNED_WINDOW = 86_400;

export interface LearnedLimit extends RateLimit {
  /** Epoch ms of the report that taught it (or last lengthened it). */
  learnedAt: number;
  /** callerTag (receipts.ts) of the caller whose report taught it. */
  by: string;
  /**
   * Epoch ms: taught by one caller only, it holds until then (the window that caller's report spoke of, plus the
   * margin) unless a different caller reports the same or tighter first. Absent: corroborated, kept.
   */
  until?: number;
}

/** What a set has learned, per class: the kept and the provisional limits. */
export type LearnedClasses = Record<string, LearnedLimit[]>;

/** One class answer's headers, as reported. */
export interface ClassReport {
  limit: number;
  /** X-RateLimit-Reset, epoch ms. */
  resetMs: number;
  /** When the report arrived (ledger time, epoch ms). */
  at: number;
  by: string;
  /** X-RateLimit-Remaining, when reported: the vendor counts `limit - remaining` in the window (spanOf). */
  remaining?: number;
}

/** The shortest common window at least `seconds` long (the longest if none is). */
export const learnedWindowFor = (seconds: number): number =>
  LEARNED_WINDOWS.find((w) => w >= seconds) ?? LONGEST_LEARNED_WINDOW;

/** `a` holds at least as tight as `b`: no more in a window at least as long. */
const asTight = (a: RateLimit, b: RateLimit): boolean =>
  a.limit <= b.limit && a.windowSeconds >= b.windowSeconds;

/** The limits of a class in force at `now`: the kept ones and the provisional ones not yet ended. */
export const inForce = (limits: readonly LearnedLimit[] | undefined, now: number): LearnedLimit[] =>
  (limits ?? []).filter((l) => l.until === undefined || l.until > now);

/**
 * What a report teaches a class, given what it has learned (`current`) and the limits that bind it anyway
 * (`binding`: the general ones and the class's configured ones). Undefined when it teaches nothing: a limit
 * at or above one that binds over as long a window, or looser than what is learned (a larger limit or a shorter
 * window): reports only tighten. Otherwise the class's new list:
 * - the same limit again lengthens its window (never shortens it), and from a different caller it corroborates;
 * - from the caller that taught them, it renews the class's provisional limits (see renew);
 * - a different caller reporting the same or tighter than a provisional limit makes it kept;
 * - anything else new is provisional: it holds until the reported reset plus the margin, at most its window,
 *   unless a different caller corroborates it (so one caller, mistaken or lying, holds the class at most the
 *   window it reports). A kept limit is never dropped by a report, so when a provisional one ends the class is
 *   back where it was. The class's first limit is provisional too (docs/class-limits.md, "Trust").
 */
export function teach(
  current: readonly LearnedLimit[],
  report: ClassReport,
  binding: readonly RateLimit[],
  marginMs: number,
): LearnedLimit[] | undefined {
  const renewed = renew(inForce(current, report.at), report, marginMs);
  return adopt(renewed ?? current, report, binding, marginMs) ?? renewed;
}

/**
 * Whether a provisional limit's caller renews it by moving its end to `until`: only when that moves it by at
 * least half its window, so a caller that reports on every vendor window writes the learned item (and raises the
 * learned version every process then reads again) at most about twice per window of the limit, not at every
 * report.
 */
const renews = (l: LearnedLimit, until: number): boolean =>
  l.until !== undefined && until - l.until >= l.windowSeconds * 500;

/**
 * A class's answers tell only its most constrained window at the time, so one caller's report of the class
 * renews every provisional limit of it that caller taught, to one of its own windows and the margin after the
 * report: its word holds while it keeps reporting, each report at most a window (docs/class-limits.md, "Trust").
 * The limit the report names is left to adopt, which holds it to the reported reset. Undefined: no change.
 */
function renew(
  live: readonly LearnedLimit[],
  report: ClassReport,
  marginMs: number,
): LearnedLimit[] | undefined {
  const { at, by } = report;
  const named = Math.min(report.limit, MAX_LEARNED_LIMIT);
  let changed = false;
  const next = live.map((l) => {
    const until = at + l.windowSeconds * 1000 + marginMs;
    if (l.by !== by || l.limit === named || !renews(l, until)) return l;
    changed = true;
    return { ...l, until };
  });
  return changed ? next : undefined;
}

/**
 * How long the requests a report's window counts (`limit - remaining`) took to make, at least, given other
 * limits of the same requests (the general ones, the class's configured ones and its learned ones): the vendor
 * let none through beyond any of its limits, so `n` requests under "l per w" span at least (ceil(n / l) - 2)
 * windows w (fixed windows: they fill ceil(n / l) windows, of which the first and the last may be cut short;
 * sliding ones span more). The window's room comes back (the reset) a window after its oldest counted request
 * (sliding) or after its start, before that request (fixed), so the window is at least `reset - at` plus this.
 * Why it matters: a sliding window's reset, seen while it is full of requests made over a while, is much less
 * than the window: a 30 per 60 s limit first seen 28 s before its reset was learned as 30 per 30 s, which let
 * through twice its limit a minute until a report after a pause lengthened it (issue 24). Only lengthens: the
 * limits used are kept ones or the reporter's own (one caller's word never lengthens another's limit for good),
 * and a wrong (looser) one gives less, never more, than the true span.
 */
function spanOf(report: ClassReport, limits: readonly RateLimit[]): number {
  if (report.remaining === undefined || !Number.isFinite(report.remaining)) return 0;
  const counted = report.limit - Math.max(0, report.remaining);
  return Math.max(
    0,
    ...limits.map((l) => Math.max(0, Math.ceil(counted / l.limit) - 2) * l.windowSeconds * 1000),
  );
}

function adopt(
  current: readonly LearnedLimit[],
  report: ClassReport,
  binding: readonly RateLimit[],
  marginMs: number,
): LearnedLimit[] | undefined {
  const { at, by } = report;
  const live = inForce(current, at);
  const limit = Math.min(report.limit, MAX_LEARNED_LIMIT);
  // X-RateLimit-Reset is whole seconds, the moment of room rounded up: what is certainly left of the window is
  // a second less (else a 10 s sliding window, seen as 10.4 s, would be learned as 15). And the window holds the
  // requests the vendor counts, which took at least spanOf to make: its oldest is at least that long before.
  const spanMs = spanOf(report, [...binding, ...live.filter((l) => l.until === undefined || l.by === by)]);
  const seconds = Math.max(1, Math.ceil((report.resetMs - 1000 - at + spanMs) / 1000));
  const windowSeconds = learnedWindowFor(seconds);
  const taught: RateLimit = { limit, windowSeconds };
  if (binding.some((b) => asTight(b, taught))) return undefined;
  const until = Math.min(report.resetMs, at + windowSeconds * 1000) + marginMs;
  const next = live.map((l) => ({ ...l }));
  const same = next.find((l) => l.limit === limit);
  if (same) {
    let changed = false;
    if (windowSeconds > same.windowSeconds) {
      same.windowSeconds = windowSeconds;
      same.learnedAt = at;
      changed = true;
    }
    if (same.until !== undefined && same.by !== by) {
      delete same.until;
      changed = true;
    } else if (same.until !== undefined && renews(same, until)) {
      same.until = until;
      changed = true;
    }
    return changed ? dedupe(next) : undefined;
  }
  // A provisional limit another caller now reports as tight or tighter: both callers agree on it.
  const agreed = next.find((l) => l.until !== undefined && l.by !== by && asTight(taught, l));
  if (agreed) {
    delete agreed.until;
    return dedupe(next);
  }
  // Looser than (or as loose as) something learned: nothing new.
  if (next.some((l) => asTight(l, taught))) return undefined;
  const added: LearnedLimit = { ...taught, learnedAt: heldSince(current, taught, at), by, until };
  // Provisional beside what is kept: when it ends, the kept limits are as they were.
  const kept = next.filter((l) => l.until === undefined);
  const provisional = next.filter((l) => l.until !== undefined && !asTight(added, l));
  const all = [...kept, ...provisional, added];
  if (all.length <= MAX_LEARNED_PER_CLASS) return all;
  // No room: the new one joins the limit of the nearest window as the tighter of both (fewer over longer),
  // which holds at least what each held.
  const others = all.slice(0, -1);
  const nearest = others.reduce((a, b) =>
    Math.abs(Math.log(b.windowSeconds / windowSeconds)) < Math.abs(Math.log(a.windowSeconds / windowSeconds))
      ? b
      : a,
  );
  nearest.limit = Math.min(nearest.limit, limit);
  nearest.windowSeconds = Math.max(nearest.windowSeconds, windowSeconds);
  nearest.learnedAt = at;
  if (nearest.until !== undefined) nearest.until = Math.max(nearest.until, until);
  return dedupe(others).slice(0, MAX_LEARNED_PER_CLASS);
}

/**
 * When a limit taught again has held the class, at `at`: since it was first learned when it is the limit that
 * lapsed last (the class had nothing else in force since, so the probe held it, which over the limit's window
 * lets through no more than the limit does); else from now. A provisional limit lapses when its caller's
 * reports pause (a window left full until its reset, no answer to report): taught again right after, what the
 * ledger knows of the class's history (seeding a new ring, ledger-state.ts seedTimes) should not start afresh.
 */
function heldSince(current: readonly LearnedLimit[], taught: RateLimit, at: number): number {
  const lapsed = current.find(
    (l) => l.limit === taught.limit && l.windowSeconds === taught.windowSeconds && l.until !== undefined,
  );
  if (!lapsed || lapsed.until === undefined || lapsed.until > at) return at;
  const lastToLapse = current.every((l) => l.until !== undefined && l.until <= (lapsed.until as number));
  const probeNoLooser =
    PROBE_LIMIT.limit * (Math.ceil(taught.windowSeconds / PROBE_LIMIT.windowSeconds) + 1) <= taught.limit;
  return lastToLapse && probeNoLooser ? lapsed.learnedAt : at;
}

/** Drops a limit another one of the list already holds as tight (kept ones first). */
function dedupe(limits: LearnedLimit[]): LearnedLimit[] {
  const sorted = [...limits].sort((a, b) => Number(a.until !== undefined) - Number(b.until !== undefined));
  const out: LearnedLimit[] = [];
  for (const l of sorted)
    if (!out.some((o) => asTight(o, l) && (o.until === undefined || l.until !== undefined))) out.push(l);
  return out;
}

/**
 * The rings a learned class is held to at `now`: its learned limits in force, less those a binding limit holds
 * anyway; the probe while none is learned.
 */
export function learnedRingLimits(
  learned: readonly LearnedLimit[] | undefined,
  binding: readonly RateLimit[],
  now: number,
): RateLimit[] {
  const live = inForce(learned, now);
  if (live.length === 0) return [PROBE_LIMIT];
  const kept = live
    .filter((l) => !binding.some((b) => asTight(b, l)))
    .map(({ limit, windowSeconds }) => ({ limit, windowSeconds }));
  return kept.length > 0 ? kept : [];
}

/** The next moment at which a provisional limit of `learned` ends (the learned view changes then), or Infinity. */
export const nextEnd = (learned: LearnedClasses, now: number): number =>
  Math.min(
    Number.POSITIVE_INFINITY,
    ...Object.values(learned)
      .flat()
      .map((l) => l.until ?? Number.POSITIVE_INFINITY)
      .filter((u) => u > now),
  );
