import type { RateLimit } from '../config/rate-limits.js';

/**
 * Learned class limits (docs/class-limits.md): the trust rules, no I/O. A class configured with no limits
 * (`rateLimits.classes.<name> = []`) is held to a probe until the vendor's X-RateLimit-* headers on one of its
 * answers tell its limit; then to what they told, as far as the rules let one caller's word count. Rule names (T1,
 * M2, ...) are those of the tables in docs/class-limits.md. What one report says (its window, in ledger time) is
 * learned-evidence.ts's; limits that rise are learned-rise.ts's.
 */

/** Until a class's first limit is learned: at most one grant in any span of this window (plus the margin). */
export const PROBE_LIMIT: RateLimit = { limit: 1, windowSeconds: 10 };
/**
 * The most a denial on the probe tells a caller to wait: the answer to the one request the probe let through
 * teaches the class's limits within a round trip, so the next ask should not wait out the probe's whole span.
 */
export const PROBE_RETRY_MS = 1000;
/**
 * Windows a class keeps at once (M2): a vendor family may have three (10 s, a minute, an hour). A set whose item has
 * no room for three per learned class at their worst keeps MIN_LEARNED_WINDOWS (limit-plan.ts decides).
 */
export const MAX_LEARNED_WINDOWS = 3;
export const MIN_LEARNED_WINDOWS = 2;
/**
 * The largest learned limit kept exactly; a larger one is kept as this (lower: safe). The ledger item is sized
 * for every learned class at this limit (limit-plan.ts).
 */
export const MAX_LEARNED_LIMIT = 400;
/** Learned windows are rounded UP to one of these (seconds): the vendor's headers carry no window length. */
export const LEARNED_WINDOWS = [
  1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400,
] as const;
export const LONGEST_LEARNED_WINDOW = 86_400;
/**
 * How many margins past a window one caller's word holds after its last report (T2, T3): the ledger frees room
 * for the next grant at most a window and a margin after the grant a report answers, and that grant's answer is
 * reported within two margins more.
 */
export const PROVISIONAL_MARGINS = 3;

export interface LearnedLimit extends RateLimit {
  /** Epoch ms (ledger time) of the report that taught it (or since when it has held: heldSince). */
  learnedAt: number;
  /** callerTag (receipts.ts) of the caller whose report taught it. */
  by: string;
  /**
   * Epoch ms: one caller's word (provisional), in force until then unless its caller renews it (T3) or another
   * caller corroborates it (T4). Absent: kept.
   */
  until?: number;
  /** A kept limit a rise adopted (R3): the limit it replaced. */
  raisedFrom?: number;
}

/** What a set has learned, per class: the kept and the provisional limits (lapsed ones a while, for heldSince). */
export type LearnedClasses = Record<string, LearnedLimit[]>;

/** What one class report says of a limit, in ledger time (learned-evidence.ts evidenceOf). */
export interface ClassEvidence {
  /** The limit named, clamped to MAX_LEARNED_LIMIT (I5). */
  limit: number;
  /** The window it implies (I3, I4). */
  windowSeconds: number;
  /**
   * The part of `windowSeconds` its reset and the counted requests' span imply (I3 a, c), without the ledger's own
   * history (b): what may corroborate another caller's word for good (T4). History is the ledger's: requests sent
   * without a permit make it longer than the vendor's, so what it adds stays one caller's word. Absent: all of it.
   */
  keptWindowSeconds?: number;
  /** When the report arrived (ledger time, epoch ms). */
  at: number;
  /** callerTag of the reporting caller. */
  by: string;
  /** The answer was a 429. */
  refused: boolean;
  /**
   * The latest ledger time its reset can mean (C1): one caller's word lasts at least until then and three margins,
   * however short the window its lower bound rounds to (a vendor cap of the same report holds the class until then).
   */
  resetMs?: number;
}

export interface TeachOptions {
  marginMs: number;
  /** Windows the class may keep (M2): MAX_LEARNED_WINDOWS where the item has room, else MIN_LEARNED_WINDOWS. */
  maxWindows: number;
}

/** The shortest common window at least `seconds` long (the longest if none is). */
export const learnedWindowFor = (seconds: number): number =>
  LEARNED_WINDOWS.find((w) => w >= seconds) ?? LONGEST_LEARNED_WINDOW;

/** `a` holds at least as tight as `b`: no more in a window at least as long. */
export const asTight = (a: RateLimit, b: RateLimit): boolean =>
  a.limit <= b.limit && a.windowSeconds >= b.windowSeconds;

const isKept = (l: LearnedLimit): boolean => l.until === undefined;

/** The limits of a class in force at `now`: the kept ones and the provisional ones not yet ended. */
export const inForce = (limits: readonly LearnedLimit[] | undefined, now: number): LearnedLimit[] =>
  (limits ?? []).filter((l) => l.until === undefined || l.until > now);

/** The end of one caller's word reported at `at` about a limit of `windowSeconds` (T2). */
export const provisionalEnd = (at: number, windowSeconds: number, marginMs: number, resetMs = 0): number =>
  Math.max(at + windowSeconds * 1000, resetMs) + PROVISIONAL_MARGINS * marginMs;

/**
 * What a report teaches a class, given what it has learned (`current`): the class's new list, or undefined when
 * nothing changes. The rules, in order (docs/class-limits.md, "Trust" and "Room"):
 * - T3: it renews its caller's provisional limits it does not contradict;
 * - T4: it makes kept another caller's provisional limit of the same `limit` over a window no longer than its own;
 * - T1: it adds itself, provisional, where nothing in force holds the class as tight (never replacing anything);
 * - M2: a window more than the class may keep joins the nearest window as the tighter of both, provisional.
 * `evidence` has passed I1-I5 (learned-evidence.ts); a 429 teaches like any answer (its headers name a limit).
 */
export function teach(
  current: readonly LearnedLimit[],
  evidence: ClassEvidence,
  options: TeachOptions,
): LearnedLimit[] | undefined {
  const { at } = evidence;
  const next = current.map((l) => ({ ...l }));
  let changed = renew(next, evidence, options.marginMs);
  changed = corroborate(next, evidence, options.marginMs) || changed;
  const live = inForce(next, at);
  const candidate = live.some((l) => asTight(l, evidence)) ? undefined : added(next, live, evidence, options);
  if (candidate && !live.some((l) => asTight(l, candidate))) {
    next.push(candidate);
    changed = true;
  }
  return changed ? tidy(next, at) : undefined;
}

/**
 * T3: the report's caller renews every provisional limit of the class it taught, to its own window (at least its
 * caller's longest in force) and three margins after the report (one caller's word lasts while that caller keeps using the class: the vendor's headers
 * name one window at a time, so a class with two limits shows each only now and then), unless the report
 * contradicts it: a larger limit over a window no longer than that limit's (it may be that window's, raised; the
 * limit then lapses, and what the answers say is learned again). Written only when worth it (worthRenewing).
 */
function renew(next: LearnedLimit[], evidence: ClassEvidence, marginMs: number): boolean {
  let changed = false;
  const own = next.filter((l) => !isKept(l) && l.by === evidence.by && (l.until as number) > evidence.at);
  // While the caller's own longest limit holds the class, none of its limits can be answered (nor renewed): each
  // lasts at least that long after the report.
  const longest = Math.max(0, ...own.map((l) => l.windowSeconds));
  for (const l of own) {
    const contradicts = evidence.limit > l.limit && evidence.windowSeconds <= l.windowSeconds;
    const until = provisionalEnd(evidence.at, Math.max(l.windowSeconds, longest), marginMs, evidence.resetMs);
    if (contradicts || !worthRenewing(l, until)) continue;
    l.until = until;
    changed = true;
  }
  return changed;
}

/**
 * Whether moving a provisional limit's end to `until` is worth a write of the learned item (and every process's
 * read of it after): when it moves the end by half a window or more (T3), so a caller that reports often writes it
 * about twice per window of the limit. A report that moves it less leaves the end where it was: at least half a
 * window and three margins after that report (the property counts a lapse after it: learned-checks.ts lapsedAt).
 */
const worthRenewing = (l: LearnedLimit, until: number): boolean =>
  until - (l.until as number) >= l.windowSeconds * 500;

/**
 * T4: another caller naming the same limit over a window at least as long corroborates a provisional limit: both
 * say the class allows no more than `limit` in a window that long. Only the same limit: a different one (tighter or
 * looser) corroborates nothing (before, an honest 10/60 s made a liar's 49/60 s kept). Only what the reset and the
 * counted requests' span say corroborates (keptWindowSeconds); what the ledger's own history adds to the window
 * renews the limit instead, as its own caller's report would (T3): in force while the class is used, never kept.
 * A provisional limit that lapsed lately (still on the list) is corroborated as well, and kept again.
 */
function corroborate(next: LearnedLimit[], evidence: ClassEvidence, marginMs: number): boolean {
  let changed = false;
  const kept = evidence.keptWindowSeconds ?? evidence.windowSeconds;
  // Lapsed ones still on the list too (tidy keeps them a window): two callers that take turns at a class answer a
  // window or more apart, and what they agree on is no less so for the lapse between them.
  for (const l of next) {
    if (isKept(l) || l.by === evidence.by || l.limit !== evidence.limit) continue;
    const live = (l.until as number) > evidence.at;
    if (kept >= l.windowSeconds) {
      delete l.until;
      changed = true;
    } else if (live && evidence.windowSeconds >= l.windowSeconds) {
      const until = provisionalEnd(evidence.at, l.windowSeconds, marginMs, evidence.resetMs);
      if (!worthRenewing(l, until)) continue;
      l.until = until;
      changed = true;
    }
  }
  return changed;
}

/**
 * T1 and M2: the report's own limit, provisional; where the class would then hold more windows than it may keep,
 * joined to the nearest window as the tighter of both (fewer over longer): over the shortest window in force at
 * least as long as its own, else its own window with the tightest limit of the longest window in force. Either
 * way the windows in force stay as many (the merged limit holds that window's others as tight, learnedRingLimits),
 * and nothing kept changes.
 */
function added(
  next: readonly LearnedLimit[],
  live: readonly LearnedLimit[],
  evidence: ClassEvidence,
  { marginMs, maxWindows }: TeachOptions,
): LearnedLimit {
  const { at, by } = evidence;
  let taught: RateLimit = { limit: evidence.limit, windowSeconds: evidence.windowSeconds };
  const windows = [...new Set(planLimits(live).map((l) => l.windowSeconds))].sort((a, b) => a - b);
  if (!windows.includes(taught.windowSeconds) && windows.length >= maxWindows) {
    const longer = windows.find((w) => w >= taught.windowSeconds);
    const into = longer ?? (windows.at(-1) as number);
    const limitAt = Math.min(
      ...planLimits(live)
        .filter((l) => l.windowSeconds === into)
        .map((l) => l.limit),
    );
    taught = { limit: Math.min(taught.limit, limitAt), windowSeconds: longer ?? taught.windowSeconds };
  }
  // Like a renewal (T3): at least as long as the caller's own longest limit in force, which may hold the class
  // (and so its answers, which renew this one) that long.
  const longest = Math.max(
    taught.windowSeconds,
    ...live.filter((l) => !isKept(l) && l.by === by).map((l) => l.windowSeconds),
  );
  return {
    ...taught,
    learnedAt: heldSince(next, taught, at),
    by,
    until: provisionalEnd(at, longest, marginMs, evidence.resetMs),
  };
}

/**
 * The stored list, tidied at `at`: a limit another one holds as tight is dropped where nothing is lost by it (a
 * kept one by a kept one; a provisional one by a kept one or by another of its own caller's), and a provisional
 * limit that lapsed more than its window ago, or was taught again since, is forgotten (heldSince needs it until
 * then).
 */
function tidy(limits: LearnedLimit[], at: number): LearnedLimit[] {
  const live = inForce(limits, at);
  // A lapsed limit taught again is the one in force now.
  const recent = limits.filter(
    (l) =>
      live.includes(l) ||
      ((l.until as number) + l.windowSeconds * 1000 > at &&
        !live.some((o) => o.limit === l.limit && o.windowSeconds === l.windowSeconds)),
  );
  const covers = (o: LearnedLimit, l: LearnedLimit): boolean =>
    asTight(o, l) &&
    (isKept(o) || (!isKept(l) && o.by === l.by && (o.until as number) >= (l.until as number)));
  const dropped = new Set<LearnedLimit>();
  for (const l of live)
    for (const o of live) {
      if (o === l || dropped.has(o) || !covers(o, l)) continue;
      // Of two that cover each other, the first stays.
      if (covers(l, o) && live.indexOf(l) < live.indexOf(o)) continue;
      dropped.add(l);
      break;
    }
  return recent.filter((l) => !dropped.has(l));
}

/**
 * When a limit taught again has held the class, at `at`: since it was first learned when it is the limit that
 * lapsed last (the class had nothing else in force since, so the probe held it, which over the limit's window
 * lets through no more than the limit does); else from now. A provisional limit lapses when its caller's reports
 * pause (a window left full until its reset, no answer to report): taught again right after, what the ledger knows
 * of the class's history (seeding a new ring, ledger-state.ts seedTimes) should not start afresh.
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

/** Of limits in force, those no other one holds as tight (equal ones: the first): what the rings are made of. */
function planLimits(live: readonly RateLimit[]): RateLimit[] {
  return live.filter((l, i) => !live.some((o, j) => j !== i && asTight(o, l) && !(asTight(l, o) && j > i)));
}

/**
 * The rings a learned class is held to at `now` (M1): one per window of its limits in force, at the smallest limit
 * of that window, less the limits a binding one holds anyway; the probe while none is learned. `raised`: limits
 * under a rise trial (learned-rise.ts), held to their trial limit instead (R2).
 */
export function learnedRingLimits(
  learned: readonly LearnedLimit[] | undefined,
  binding: readonly RateLimit[],
  now: number,
  raised: readonly { limit: number; windowSeconds: number; trialLimit: number }[] = [],
): RateLimit[] {
  const live = inForce(learned, now);
  if (live.length === 0) return [PROBE_LIMIT];
  const effective = live.map((l) => {
    const trial = isKept(l)
      ? raised.find((r) => r.limit === l.limit && r.windowSeconds === l.windowSeconds)
      : undefined;
    return { limit: trial ? trial.trialLimit : l.limit, windowSeconds: l.windowSeconds };
  });
  const byWindow = new Map<number, number>();
  for (const l of planLimits(effective)) {
    if (binding.some((b) => asTight(b, l))) continue;
    byWindow.set(l.windowSeconds, Math.min(byWindow.get(l.windowSeconds) ?? l.limit, l.limit));
  }
  return [...byWindow].sort(([a], [b]) => a - b).map(([windowSeconds, limit]) => ({ limit, windowSeconds }));
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
