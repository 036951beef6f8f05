/**
 * The classes soak's figures (soak-classes.ts runs it): from what the clients saw (send times, classes) and what
 * the vendor logged. No I/O.
 */
import type { RateLimit } from '../shared/config/credential-sets.js';
import { type LearnedClassFigures, type ShownView, shownText } from './learned-watch.js';
import { type ClassesSoakSettings, type ClassesVariant, learnsClasses } from './soak-classes-settings.js';
import type { LiarReport } from './soak-liar.js';
import {
  busiestSpans,
  type LimitMs,
  mostAllowed,
  type SpanFigure,
  type VendorLogEntry,
} from './soak-report.js';

/** One row of the table: the general limits, or one class. */
export interface ClassRow {
  variant: ClassesVariant;
  /** `general` or the class (family) name. */
  quota: string;
  /** The vendor's limits of this quota (the sandbox's settings). */
  limits: RateLimit[];
  /** Whether the broker was told these limits (general: always). */
  told: boolean;
  /** Vendor requests of the class (general: every request, the general limits count them all). */
  requests: number;
  /** Served by the vendor (its log). */
  served: number;
  /** Vendor 429s this quota's limits caused, on requests sent before the class's first answer arrived. */
  vendor429Learning: number;
  /** The same, sent after it (general: every one). */
  vendor429After: number;
  /**
   * Of those, the ones a limit refused that no answer of the class had named (X-RateLimit-Limit) before the
   * request was sent: the vendor names only the tightest window, so a class's second limit shows itself when it
   * is nearly full, and a request already in flight may meet it (docs/class-limits.md, "A limit not yet named").
   */
  vendor429AfterUnnamed: number;
  /** The most 429s after learning by one such limit not yet named (the promise: at most one each). */
  vendor429PerUnnamedLimit: number;
  /** Served after learning over the most the limits allow in each quota key's span of use after learning. */
  quotaUsedPct: number;
  /**
   * The same over the run, learning included: a class held back (the limits had room for 2 s or more and none of
   * it was served) at the start or the end of a token's use counts as unused, and a token without any of it counts
   * whole (useOf). quotaUsedPct cannot see a class the broker stops serving (or serves only late on a token).
   */
  quotaUsedRunPct: number;
  /** Busiest span per limit, from the vendor's log: e.g. "10/10s". */
  busiest: SpanFigure[];
  /**
   * From the class's first request to the moment the broker learned its first limit (the learnedAt the
   * operator's view showed first), in ms (learned classes); the first answer's time where no view was watched,
   * undefined where the watched view never showed one (negative: a report taught it before any request).
   */
  learnMs: number | undefined;
  /** Learned classes: polls (every second) that found the class back at the probe after it had learned. */
  probeFallbacks?: number;
  /** Learned classes: what the broker showed as learned at the end, e.g. "10/10s + 30/60s". */
  learnedAtEnd?: string;
  /**
   * Learned classes: after the first learning, how often the listed limits (limit and window) changed from one
   * poll to the next, and how many of those changes were returns to the probe.
   */
  viewChanges?: number;
  probeReturns?: number;
  /** A row the run's events split (a limit change of its class, the restart, the liar): each part's figures. */
  phases?: PhaseFigure[];
  /** Per change of the class's vendor limits: how long until the broker listed the new limit as learned. */
  adoptions?: Adoption[];
  /** A class the liar reported on: how long the broker listed what it said. */
  liar?: LiarFigures;
}

/** One part of a run between events, after the class's first answer. */
export interface PhaseFigure {
  /** What began it: `start`, or an event's label. */
  label: string;
  /** Seconds into the run. */
  fromSeconds: number;
  toSeconds: number;
  /** The vendor's limits of the quota in this part. */
  limits: RateLimit[];
  /** Served in this part, learning included, and over the most the limits allow in it (quotaUsedRunPct's reading). */
  served: number;
  quotaUsedPct: number;
  /** Vendor 429s this quota's limits caused on requests sent in this part after learning, and of those by a limit not yet named. */
  vendor429: number;
  vendor429Unnamed: number;
  /** Busiest span per limit in this part (every request of it, learning or not). */
  busiest: SpanFigure[];
}

export interface Adoption {
  from: RateLimit[];
  to: RateLimit[];
  raised: boolean;
  /** Seconds into the run of the change. */
  atSeconds: number;
  /** From the change to the first poll that listed a new limit's value as learned; undefined: never in the run. */
  seconds: number | undefined;
  /** What that poll listed. */
  shown?: string;
}

export interface LiarFigures {
  /** The limit values it reported for the class (e.g. [1]). */
  limits: number[];
  reports: number;
  /** The longest window its reports spoke of (their reset less the moment sent), seconds. */
  reportedWindowSeconds: number;
  /**
   * What it did, from the vendor's log: from its first report to the end, the longest stretch in which the class's
   * vendor limits had room for another of its requests (given what the vendor had served of it) and the vendor
   * served none, though its consumers asked all the time; and from its last report to the end of the stretch
   * that held the class then (0: none held it, undefined: held at the end).
   */
  longestHoldSeconds: number;
  releaseSeconds: number | undefined;
  /** What the broker showed: polls listing one of its limits as learned, the longest unbroken stretch, seconds. */
  longestListedSeconds: number;
}

/** A stretch without service shorter than this is a round trip or the ledger's margin, not a hold. */
export const HOLD_NOISE_SECONDS = 2;

/**
 * Stretches [room, next served) in which the limits had room for one more request (sliding reading, every quota
 * key's served times together: at a token change the new token has room sooner, so this errs short) but none
 * was served, from sorted served times.
 */
export function idleWithRoom(times: readonly number[], limits: readonly RateLimit[]): [number, number][] {
  const idle: [number, number][] = [];
  for (let i = 0; i + 1 < times.length; i++) {
    let room = times[i] as number;
    for (const { limit, windowSeconds } of limits) {
      const back = times[i + 1 - limit];
      if (back !== undefined) room = Math.max(room, back + windowSeconds * 1000);
    }
    const next = times[i + 1] as number;
    if (next > room) idle.push([room, next]);
  }
  return idle;
}

/** Something the run did at a moment (epoch ms, broker time). */
export interface SoakEvent {
  at: number;
  label: 'limit change' | 'restart' | 'liar' | 'liar gone';
  /** The class it concerns; none: every quota (the restart). */
  family?: string;
  /** A limit change: the family's new limits. */
  limits?: RateLimit[];
  /** A restart: how long the vend API was down, ms. */
  downMs?: number;
}

/**
 * A consumer's class report the broker took (2xx), as its fetch saw it: sent at `sentAt`, answered at `at`. The
 * broker answers once the report is in the ledger: from then on the ledger knows the limit it names.
 */
export interface ClassReportSent {
  sentAt: number;
  at: number;
  class: string;
  limit: number;
}

/** The run's clock and what happened in it, for classRows. */
export interface SoakTimeline {
  startedAt: number;
  endedAt: number;
  events: SoakEvent[];
  liarReports: LiarReport[];
  /**
   * The consumers' class reports: a limit is named (to the ledger) by the first report of it the broker took, not
   * by the answer a client got before reporting it (docs/class-limits.md, "How learning uses a report", 3). Absent
   * (a record of an older run): by the first answer naming it that came back, as before.
   */
  classReports?: ClassReportSent[];
}

export interface ClassesSoakResult {
  settings: ClassesSoakSettings;
  rows: ClassRow[];
  /** spanExcesses of the vendor's log: every span above a limit. */
  excesses: string[];
  clientErrors: Record<string, number>;
  vendor401: number;
  /** Logins the vendor received, and tokens the consumers' requests carried: the refresher's work. */
  logins: number;
  tokens: number;
  secretsInLogs: number;
  elapsedSeconds: number;
  /** What the run did, at seconds into it. */
  events: SoakEvent[];
  /** The liar's reports, at seconds into the run, and the broker's status for each. */
  liarReports?: LiarReport[];
  /** Learned variant: `token-broker status <set>` as the operator ran it two thirds into the run. */
  status?: string;
}

/** One vendor answer to a consumer, as its fetch saw it. */
export interface VendorHit {
  sentAt: number;
  at: number;
  status: number;
  token: string;
  requestId: string | undefined;
  /** The family whose prefix the path has (the soak's own knowledge), undefined for a general request. */
  family: string | undefined;
  /** The answer's X-RateLimit-Limit: the limit it named. */
  named: number | undefined;
}

type RefusingLog = VendorLogEntry & { requestId: string; refusedBy?: { family?: string; limit?: number } };

/** Served times per quota key, each sorted. */
function timesByKey(entries: readonly VendorLogEntry[]): { key: string; times: number[] }[] {
  const byKey = new Map<string, number[]>();
  for (const entry of entries) {
    const times = byKey.get(entry.quotaKey);
    if (times) times.push(entry.at);
    else byKey.set(entry.quotaKey, [entry.at]);
  }
  return [...byKey].map(([key, times]) => ({ key, times: times.sort((a, b) => a - b) }));
}

/** The first moment after sorted `times` at which the limits have room for one more (sliding reading). */
function roomAfter(times: readonly number[], limits: readonly RateLimit[]): number {
  let room = times.at(-1) ?? 0;
  for (const { limit, windowSeconds } of limits) {
    const back = times[times.length - limit];
    if (back !== undefined) room = Math.max(room, back + windowSeconds * 1000);
  }
  return room;
}

/** Each quota key's tenure: from its first request of any kind to the next key's first (the last: to `end`). */
export function tenures(log: readonly VendorLogEntry[], end: number): Map<string, [number, number]> {
  const first = new Map<string, number>();
  for (const entry of log)
    first.set(entry.quotaKey, Math.min(entry.at, first.get(entry.quotaKey) ?? entry.at));
  const sorted = [...first].sort((a, b) => a[1] - b[1]);
  return new Map(sorted.map(([key, at], index) => [key, [at, Math.max(at, sorted[index + 1]?.[1] ?? end)]]));
}

/** A quota's run for useOf: every request of it the vendor served, and each key's tenure. */
interface RunSpan {
  from: number;
  to: number;
  tenures: ReadonlyMap<string, [number, number]>;
  /** Every served request of the quota, sorted per key (the room at `from` depends on those before it). */
  all: ReadonlyMap<string, readonly number[]>;
}

/**
 * Served, and the most the limits allow in each key's span of use, summed over keys. A span of use runs from the
 * key's first served to its last (a run ends mid-window; a token's last window may be cut by the next token).
 * With `span` (quotaUsedRunPct), a class held back counts as unused: a span starts where the limits had room (after
 * the key's earlier requests; a new token at once) when nothing was served for HOLD_NOISE_SECONDS or more from there,
 * and runs on to the end of the key's tenure when the limits had room that long before it and nothing was served;
 * a token on which the class was never served counts from its room to its end.
 */
function useOf(
  entries: readonly VendorLogEntry[],
  limits: readonly RateLimit[],
  span?: RunSpan,
): { used: number; allowed: number } {
  const limitsMs: LimitMs[] = limits.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 }));
  const noise = HOLD_NOISE_SECONDS * 1000;
  let used = 0;
  let allowed = 0;
  const byKey = new Map(timesByKey(entries).map((times) => [times.key, times.times]));
  /** Where the key's limits have room from, at the span's start. */
  const roomFrom = (key: string, start: number): number => {
    const before = (span?.all.get(key) ?? []).filter((at) => at < start);
    return before.length === 0 ? start : Math.max(start, roomAfter(before, limits));
  };
  for (const [key, times] of byKey) {
    used += times.length;
    const first = times[0] ?? 0;
    const last = times.at(-1) ?? 0;
    const tenure = span?.tenures.get(key);
    if (!span || !tenure) {
      allowed += mostAllowed(limitsMs, first, last);
      continue;
    }
    const room = roomFrom(key, Math.max(tenure[0], span.from));
    const end = Math.min(tenure[1], span.to);
    allowed += mostAllowed(
      limitsMs,
      first - room >= noise ? room : first,
      end - roomAfter(times, limits) >= noise ? end : last,
    );
  }
  for (const [key, [start, end]] of span?.tenures ?? []) {
    if (byKey.has(key) || !span) continue;
    const from = roomFrom(key, Math.max(start, span.from));
    const to = Math.min(end, span.to);
    if (to - from >= noise) allowed += mostAllowed(limitsMs, from, to);
  }
  return { used, allowed };
}

const pct = ({ used, allowed }: { used: number; allowed: number }): number =>
  allowed === 0 ? 0 : Number(((100 * used) / allowed).toFixed(1));

/** Stretches [from, to) in which the polls listed a limit `holds` picks; the last runs to the last poll. */
function stretches(
  history: readonly ShownView[],
  lastPollAt: number,
  holds: (view: ShownView) => boolean,
): [number, number][] {
  const found: [number, number][] = [];
  history.forEach((view, index) => {
    if (!holds(view)) return;
    const to = history[index + 1]?.at ?? lastPollAt;
    const last = found.at(-1);
    if (last && last[1] === view.at) last[1] = to;
    else found.push([view.at, to]);
  });
  return found;
}

/** A change of a class's limits that lets more through (its fastest rate higher). */
const raises = (from: readonly RateLimit[], to: readonly RateLimit[]): boolean =>
  Math.max(...to.map((l) => l.limit / l.windowSeconds)) >
  Math.max(...from.map((l) => l.limit / l.windowSeconds));

/** The table's figures, from what the clients saw (send times, classes) and what the vendor logged. */
export function classRows(
  settings: ClassesSoakSettings,
  hits: readonly VendorHit[],
  log: readonly RefusingLog[],
  learnedFigures: Record<string, LearnedClassFigures> = {},
  timeline?: SoakTimeline,
): ClassRow[] {
  const byRequestId = new Map(log.map((entry) => [entry.requestId, entry]));
  const quotas = [
    { family: undefined, limits: settings.limits },
    ...settings.families.map((f) => ({ family: f.name as string | undefined, limits: f.limits })),
  ];
  const figures = busiestSpans(log, quotas);
  const startedAt = timeline?.startedAt ?? 0;
  // Without a timeline (no run's end known), spans of use end at the last served, as before.
  const runEnd = timeline?.endedAt ?? Number.NEGATIVE_INFINITY;
  const keyTenures = tenures(log, runEnd);
  const seconds = (ms: number) => Number(((ms - startedAt) / 1000).toFixed(1));
  return quotas.map(({ family, limits }) => {
    const ofClass = hits.filter((hit) => family === undefined || hit.family === family);
    const learned = family !== undefined && learnsClasses(settings.variant);
    const firstSent = Math.min(...ofClass.map((hit) => hit.sentAt));
    // The first answer of the class (2xx or 429: both carry the X-RateLimit-* that teach the broker).
    const firstAnswer = learned ? Math.min(...ofClass.map((hit) => hit.at)) : Number.NEGATIVE_INFINITY;
    // 429s this quota's own limits caused: a family's refusal names it, a general one names no family.
    const refusedHere = hits.filter((hit) => {
      const entry = hit.requestId === undefined ? undefined : byRequestId.get(hit.requestId);
      return hit.status === 429 && entry?.served === false && entry.refusedBy?.family === family;
    });
    const learning = refusedHere.filter((hit) => hit.sentAt < firstAnswer).length;
    // After learning, refused by a limit that no answer of the class had named before the request left.
    const refusingLimit = (hit: VendorHit) => byRequestId.get(hit.requestId ?? '')?.refusedBy?.limit;
    // Named: the broker had taken a report of the limit before the request left (by the answers' return where the
    // record has no reports). A request sent earlier was in flight for the ledger, which could not know it.
    const reports = timeline?.classReports;
    const namedBefore = (limit: number | undefined, sentAt: number): boolean =>
      reports === undefined
        ? ofClass.some((answer) => answer.named === limit && answer.at < sentAt)
        : reports.some((r) => r.class === family && r.limit === limit && r.at < sentAt);
    const unnamed = refusedHere
      .filter((hit) => hit.sentAt >= firstAnswer)
      .filter((hit) => !namedBefore(refusingLimit(hit), hit.sentAt));
    const perUnnamed = new Map<number | undefined, number>();
    for (const hit of unnamed)
      perUnnamed.set(refusingLimit(hit), (perUnnamed.get(refusingLimit(hit)) ?? 0) + 1);
    const ofQuota = log.filter((entry) => family === undefined || entry.family === family);
    const served = ofQuota.filter((entry) => entry.served);
    const afterLearning = served.filter((entry) => entry.at >= firstAnswer);
    const servedByKey = new Map(timesByKey(served).map(({ key, times }) => [key, times]));

    // The run's events that split this row: its class's own, and those of every quota (the restart).
    const events = (timeline?.events ?? [])
      .filter((event) => event.family === undefined || event.family === family)
      .sort((a, b) => a.at - b.at);
    const changes = events.filter((event) => event.limits !== undefined);
    const shown = family === undefined ? undefined : learnedFigures[family];
    const phases: PhaseFigure[] = [];
    /** When the limits a change raised were adopted (the new limit's learnedAt as the broker listed it), if ever. */
    const raisedAdoption = (before: readonly RateLimit[], change: SoakEvent): number | undefined => {
      const to = change.limits ?? [];
      if (!raises(before, to)) return undefined;
      const values = new Set(to.map((l) => l.limit).filter((v) => !before.some((l) => l.limit === v)));
      const view = shown?.history.find((v) => v.at >= change.at && v.limits.some((l) => values.has(l.limit)));
      const listed = view?.limits.find((l) => values.has(l.limit));
      return listed === undefined
        ? undefined
        : Math.max(change.at, Math.min(view?.at ?? 0, listed.learnedAt ?? Infinity));
    };
    const partUses: { used: number; allowed: number }[] = [];
    const partRunUses: { used: number; allowed: number }[] = [];
    let phaseLimits: RateLimit[] = limits;
    [{ at: Number.NEGATIVE_INFINITY, label: 'start' } as const, ...events].forEach((event, index) => {
      const before = phaseLimits;
      if ('limits' in event && event.limits) phaseLimits = event.limits;
      const from = event.at;
      const to = events[index]?.at ?? Number.POSITIVE_INFINITY;
      const inPart = (at: number) => at >= from && at < to;
      const after = (at: number) => inPart(at) && at >= firstAnswer;
      // A raised limit is learned when the ledger adopts it: until then the contract spends the part learning it (a
      // trial above a kept limit, R2-R3, or one caller's word lapsing to the probe and named again, T2, T6), which
      // the adoption's own bound times (adoptBoundSeconds). The part's use counts from the adoption on; never
      // adopted, all of it against the raised limit.
      const adoptedAt = 'limits' in event && event.limits ? raisedAdoption(before, event) : undefined;
      const cuts: [number, number, RateLimit[]][] =
        adoptedAt !== undefined && adoptedAt < to
          ? [[adoptedAt, to, phaseLimits]]
          : [[from, to, phaseLimits]];
      const sumOf = (uses: { used: number; allowed: number }[]) =>
        uses.reduce((a, b) => ({ used: a.used + b.used, allowed: a.allowed + b.allowed }));
      partUses.push(
        sumOf(
          cuts.map(([a, b, limitsOfCut]) =>
            useOf(
              afterLearning.filter((entry) => entry.at >= a && entry.at < b),
              limitsOfCut,
            ),
          ),
        ),
      );
      // Of the run: learning included (the probe's request fills the vendor's first window too).
      const partUse = sumOf(
        cuts.map(([a, b, limitsOfCut]) =>
          useOf(
            served.filter((entry) => entry.at >= a && entry.at < b),
            limitsOfCut,
            { from: a, to: Math.min(b, runEnd), tenures: keyTenures, all: servedByKey },
          ),
        ),
      );
      partRunUses.push(partUse);
      phases.push({
        label: event.label,
        fromSeconds: seconds(Math.max(from, Number.isFinite(firstAnswer) ? firstAnswer : startedAt)),
        toSeconds: seconds(Math.min(to, timeline?.endedAt ?? to)),
        limits: phaseLimits,
        served: partUse.used,
        quotaUsedPct: pct(partUse),
        vendor429: refusedHere.filter((hit) => after(hit.sentAt)).length,
        vendor429Unnamed: unnamed.filter((hit) => after(hit.sentAt)).length,
        busiest: busiestSpans(
          ofQuota.filter((entry) => inPart(entry.at)),
          [{ family, limits: phaseLimits }],
        ),
      });
    });
    // With the limits changed, each part counts against its own; otherwise the whole run is one span of use (a
    // part's edge would let it start afresh while the vendor's window still holds the part before).
    const sum = (uses: { used: number; allowed: number }[]) =>
      uses.reduce((a, b) => ({ used: a.used + b.used, allowed: a.allowed + b.allowed }));
    const use = changes.length === 0 ? useOf(afterLearning, limits) : sum(partUses);
    const runUse =
      changes.length === 0
        ? useOf(served, limits, {
            from: Number.NEGATIVE_INFINITY,
            to: runEnd,
            tenures: keyTenures,
            all: servedByKey,
          })
        : sum(partRunUses);

    const lastPollAt = shown?.lastPollAt ?? timeline?.endedAt ?? 0;
    const adoptions: Adoption[] = changes.map((change) => {
      const index = events.indexOf(change);
      const from = phases[index]?.limits ?? limits;
      const to = change.limits ?? [];
      const values = new Set(to.map((l) => l.limit).filter((v) => !from.some((l) => l.limit === v)));
      const view = shown?.history.find((v) => v.at >= change.at && v.limits.some((l) => values.has(l.limit)));
      return {
        from,
        to,
        raised: raises(from, to),
        atSeconds: seconds(change.at),
        seconds: view === undefined ? undefined : Number(((view.at - change.at) / 1000).toFixed(1)),
        ...(view ? { shown: shownText(view.limits) } : {}),
      };
    });
    const lies = (timeline?.liarReports ?? []).filter((report) => report.class === family);
    let liar: LiarFigures | undefined;
    if (lies.length > 0) {
      const values = new Set(lies.map((r) => r.limit));
      const listed = stretches(shown?.history ?? [], lastPollAt, (view) =>
        view.limits.some((l) => values.has(l.limit)),
      );
      const firstLie = Math.min(...lies.map((r) => r.at));
      const lastLie = Math.max(...lies.map((r) => r.at));
      const times = served.map((entry) => entry.at).sort((a, b) => a - b);
      const end = timeline?.endedAt ?? lastPollAt;
      // The class unserved from its last service to the end of the run is a stretch too.
      const last = times.at(-1);
      const idle = [
        ...idleWithRoom(times, limits),
        ...(last === undefined ? [] : idleWithRoom([...times, end + 1], limits).slice(-1)),
      ].filter(([from, to]) => to > firstLie && to - from >= HOLD_NOISE_SECONDS * 1000);
      const after = idle.find(([from, to]) => to > lastLie && from <= lastLie + 1000 * HOLD_NOISE_SECONDS);
      liar = {
        limits: [...values],
        reports: lies.length,
        reportedWindowSeconds: Math.max(...lies.map((r) => r.reset - r.at / 1000)),
        longestHoldSeconds: Math.max(
          0,
          ...idle.map(([a, b]) => (Math.min(b, end) - Math.max(a, firstLie)) / 1000),
        ),
        releaseSeconds: after === undefined ? 0 : after[1] > end ? undefined : (after[1] - lastLie) / 1000,
        longestListedSeconds: Math.max(0, ...listed.map(([a, b]) => (b - a) / 1000)),
      };
    }
    return {
      variant: settings.variant,
      quota: family ?? 'general',
      limits,
      told: !learned,
      requests: ofClass.length,
      served: served.length,
      vendor429Learning: learning,
      vendor429After: refusedHere.length - learning,
      vendor429AfterUnnamed: unnamed.length,
      vendor429PerUnnamedLimit: Math.max(0, ...perUnnamed.values()),
      quotaUsedPct: pct(use),
      quotaUsedRunPct: pct(runUse),
      busiest:
        changes.length === 0
          ? figures.filter((figure) => figure.family === family)
          : phases.flatMap((phase) => phase.busiest),
      // Never shown as learned by a watch that saw the class: never learned (undefined), not the first answer's time.
      learnMs:
        learned && ofClass.length > 0 && (shown === undefined || shown.learnedAt !== undefined)
          ? (shown?.learnedAt ?? firstAnswer) - firstSent
          : undefined,
      ...(learned && family !== undefined
        ? {
            probeFallbacks: shown?.probeFallbacks ?? 0,
            learnedAtEnd: shown?.last ?? 'never shown',
            viewChanges: shown?.changes ?? 0,
            probeReturns: shown?.probeReturns ?? 0,
          }
        : {}),
      ...(events.length > 0 ? { phases } : {}),
      ...(adoptions.length > 0 ? { adoptions } : {}),
      ...(liar ? { liar } : {}),
    };
  });
}
