/**
 * The classes soak's figures (soak-classes.ts runs it): from what the clients saw (send times, classes) and what
 * the vendor logged. No I/O.
 */
import type { RateLimit } from '../shared/config/credential-sets.js';
import type { LearnedClassFigures } from './learned-watch.js';
import type { ClassesSoakSettings, ClassesVariant } from './soak-classes-settings.js';
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
  /** Busiest span per limit, from the vendor's log: e.g. "10/10s". */
  busiest: SpanFigure[];
  /**
   * From the class's first request to the moment the broker learned its first limit (the learnedAt the
   * operator's view showed first), in ms (learned classes); the first answer's time where the view showed none.
   */
  learnMs: number | undefined;
  /** Learned classes: polls (every second) that found the class back at the probe after it had learned. */
  probeFallbacks?: number;
  /** Learned classes: what the broker showed as learned at the end, e.g. "10/10s + 30/60s". */
  learnedAtEnd?: string;
}

export interface ClassesSoakResult {
  settings: ClassesSoakSettings;
  rows: ClassRow[];
  /** spanExcesses of the vendor's log: every span above a limit. */
  excesses: string[];
  clientErrors: Record<string, number>;
  vendor401: number;
  secretsInLogs: number;
  elapsedSeconds: number;
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

/** The table's figures, from what the clients saw (send times, classes) and what the vendor logged. */
export function classRows(
  settings: ClassesSoakSettings,
  hits: readonly VendorHit[],
  log: readonly RefusingLog[],
  learnedFigures: Record<string, LearnedClassFigures> = {},
): ClassRow[] {
  const byRequestId = new Map(log.map((entry) => [entry.requestId, entry]));
  const quotas = [
    { family: undefined, limits: settings.limits },
    ...settings.families.map((f) => ({ family: f.name as string | undefined, limits: f.limits })),
  ];
  const figures = busiestSpans(log, quotas);
  return quotas.map(({ family, limits }) => {
    const ofClass = hits.filter((hit) => family === undefined || hit.family === family);
    const learned = family !== undefined && settings.variant === 'learned';
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
    const unnamedLimits = refusedHere
      .filter((hit) => hit.sentAt >= firstAnswer)
      .filter(
        (hit) => !ofClass.some((answer) => answer.named === refusingLimit(hit) && answer.at < hit.sentAt),
      )
      .map(refusingLimit);
    const perUnnamed = new Map<number | undefined, number>();
    for (const limit of unnamedLimits) perUnnamed.set(limit, (perUnnamed.get(limit) ?? 0) + 1);
    const served = log.filter((entry) => entry.served && (family === undefined || entry.family === family));
    const limitsMs: LimitMs[] = limits.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 }));
    const byKey = new Map<string, number[]>();
    for (const entry of served) {
      if (entry.at < firstAnswer) continue;
      const times = byKey.get(entry.quotaKey);
      if (times) times.push(entry.at);
      else byKey.set(entry.quotaKey, [entry.at]);
    }
    let used = 0;
    let allowed = 0;
    for (const times of byKey.values()) {
      times.sort((a, b) => a - b);
      used += times.length;
      allowed += mostAllowed(limitsMs, Math.max(firstAnswer, times[0] ?? 0), times.at(-1) ?? 0);
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
      vendor429AfterUnnamed: unnamedLimits.length,
      vendor429PerUnnamedLimit: Math.max(0, ...perUnnamed.values()),
      quotaUsedPct: allowed === 0 ? 0 : Number(((100 * used) / allowed).toFixed(1)),
      busiest: figures.filter((figure) => figure.family === family),
      learnMs:
        learned && ofClass.length > 0
          ? (learnedFigures[family]?.learnedAt ?? firstAnswer) - firstSent
          : undefined,
      ...(learned && family !== undefined
        ? {
            probeFallbacks: learnedFigures[family]?.probeFallbacks ?? 0,
            learnedAtEnd: learnedFigures[family]?.last ?? 'never shown',
          }
        : {}),
    };
  });
}

/** What a classes soak must never show: a 429 after learning, more than one per class before, a span too full. */
export function classesSoakFailures(result: ClassesSoakResult): string[] {
  const failures: string[] = [];
  for (const row of result.rows) {
    const where = `classes (${row.variant}) ${row.quota}`;
    const named = row.vendor429After - row.vendor429AfterUnnamed;
    if (named > 0) failures.push(`${where}: ${named} vendor 429s after learning, by limits already named`);
    if (row.vendor429PerUnnamedLimit > 1)
      failures.push(`${where}: ${row.vendor429PerUnnamedLimit} vendor 429s by one limit before it was named`);
    if (row.vendor429Learning > 1)
      failures.push(`${where}: ${row.vendor429Learning} vendor 429s while learning`);
    if (row.requests === 0) failures.push(`${where}: no request reached the vendor`);
  }
  for (const excess of result.excesses) failures.push(`classes (${result.settings.variant}): ${excess}`);
  if (result.secretsInLogs > 0) failures.push(`${result.secretsInLogs} secrets in the logs`);
  return failures;
}

const limitText = (limits: readonly RateLimit[]) =>
  limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ');

/** A printed row of the classes table. */
export function classesTableRow(row: ClassRow): Record<string, string | number> {
  return {
    quota: row.quota,
    'vendor limits': limitText(row.limits),
    'broker told': row.told ? 'yes' : 'no (learned)',
    requests: row.requests,
    served: row.served,
    '429 learning': row.told ? '-' : row.vendor429Learning,
    '429 after (limit not yet named)': `${row.vendor429After} (${row.vendor429AfterUnnamed})`,
    'quota used after learning': `${row.quotaUsedPct} %`,
    busiest: row.busiest.map((f) => `${f.busiest}/${f.windowSeconds}s`).join(' '),
    'learn s (to the broker)': row.learnMs === undefined ? '-' : (row.learnMs / 1000).toFixed(3),
    'learned at the end (probe again)':
      row.learnedAtEnd === undefined ? '-' : `${row.learnedAtEnd} (${row.probeFallbacks ?? 0} polls)`,
  };
}
