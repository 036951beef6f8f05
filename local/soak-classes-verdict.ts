import type { RateLimit } from '../shared/config/credential-sets.js';
import { PROVISIONAL_MARGINS } from '../shared/ledger/learned-limits.js';
import { RISE_TRIAL_WINDOWS } from '../shared/ledger/learned-rise.js';
import type { ClassesSoakResult, ClassRow, LiarFigures, PhaseFigure } from './soak-classes-report.js';
import type { SpanFigure } from './soak-report.js';

/** What the classes soak promises of its figures (soak-classes-report.ts), and how a row is printed. */

/**
 * The bounds the rules promise (docs/class-limits.md), each with 2 s of slack: the 1 s poll, whole-second resets,
 * and the 2 s below which a stretch without service counts as a round trip, not a hold (HOLD_NOISE_SECONDS).
 * - R3: a raised limit is listed as learned within four windows of the second caller's report of it, and callers
 *   report once per vendor window: within RISE_TRIAL_WINDOWS + 2 windows of the vendor's change, and two margins.
 * - T2: one caller's word holds a class no longer than the window it reported and three margins after its last
 *   report (it holds while it keeps reporting, a report at a time: the report limits bound how often).
 */
export const POLL_SLACK_SECONDS = 2;
export const ADOPT_WINDOWS = RISE_TRIAL_WINDOWS + 2;
export const adoptBoundSeconds = (to: readonly RateLimit[], marginSeconds: number): number =>
  ADOPT_WINDOWS * Math.max(...to.map((l) => l.windowSeconds)) + 2 * marginSeconds + POLL_SLACK_SECONDS;
export const liarHoldBoundSeconds = (liar: LiarFigures, marginSeconds: number): number =>
  liar.reportedWindowSeconds + PROVISIONAL_MARGINS * marginSeconds + POLL_SLACK_SECONDS;

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
    const margin = result.settings.marginSeconds;
    for (const adoption of row.adoptions ?? []) {
      const bound = adoptBoundSeconds(adoption.to, margin);
      if (adoption.raised && !(adoption.seconds !== undefined && adoption.seconds <= bound))
        failures.push(
          `${where}: the raised limit ${limitText(adoption.to)} ${adoption.seconds === undefined ? 'never listed as learned' : `listed as learned after ${adoption.seconds} s`} (promise: within ${bound} s)`,
        );
    }
    const released = row.liar?.releaseSeconds ?? Number.POSITIVE_INFINITY;
    if (row.liar && released > liarHoldBoundSeconds(row.liar, margin))
      failures.push(
        `${where}: the liar's word (${row.liar.limits.join(', ')}) held the class ${Number.isFinite(released) ? `${released.toFixed(0)} s` : 'to the end'} after its last report (promise: at most ${liarHoldBoundSeconds(row.liar, margin).toFixed(1)} s, the window it reported and three margins)`,
      );
  }
  for (const excess of result.excesses) failures.push(`classes (${result.settings.variant}): ${excess}`);
  if (result.secretsInLogs > 0) failures.push(`${result.secretsInLogs} secrets in the logs`);
  return failures;
}

const limitText = (limits: readonly RateLimit[]) =>
  limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ');

const busiestText = (figures: readonly SpanFigure[]) =>
  figures.map((f) => `${f.busiest}/${f.windowSeconds}s`).join(' ');

/** `0-100 s 4/60s: 97 %, busiest 4/60s, 429 0 (0)` per part. */
const phasesText = (phases: readonly PhaseFigure[]) =>
  phases
    .map(
      (p) =>
        `${p.label === 'start' ? '' : `${p.label} `}${p.fromSeconds.toFixed(0)}-${p.toSeconds.toFixed(0)} s ` +
        `${limitText(p.limits)}: ${p.quotaUsedPct} %, busiest ${busiestText(p.busiest)}, 429 ${p.vendor429} (${p.vendor429Unnamed})`,
    )
    .join(' | ');

/** A printed row of the classes table (the variants' own columns only where the row has their figures). */
export function classesTableRow(row: ClassRow): Record<string, string | number> {
  const changed = row.phases?.filter((p) => p.label === 'limit change') ?? [];
  return {
    quota: row.quota,
    'vendor limits': [
      limitText(row.limits),
      ...changed.map((p) => `${limitText(p.limits)} at ${p.fromSeconds.toFixed(0)} s`),
    ].join(' -> '),
    'broker told': row.told ? 'yes' : 'no (learned)',
    requests: row.requests,
    served: row.served,
    '429 learning': row.told ? '-' : row.vendor429Learning,
    '429 after (limit not yet named)': `${row.vendor429After} (${row.vendor429AfterUnnamed})`,
    'quota used after learning': `${row.quotaUsedPct} %`,
    // Issue 32: where a variant may stop serving a class, the span-of-use figure above cannot see it.
    ...(row.variant === 'learned' || row.variant === 'configured'
      ? {}
      : { 'used of the run (held back counts)': `${row.quotaUsedRunPct} %` }),
    // With changed limits, each part's busiest spans against its own limits.
    busiest:
      changed.length === 0 || !row.phases
        ? busiestText(row.busiest)
        : row.phases.map((p) => busiestText(p.busiest)).join(' -> '),
    'learn s (to the broker)':
      row.learnMs !== undefined ? (row.learnMs / 1000).toFixed(3) : row.told ? '-' : 'never',
    'learned at the end (probe again)':
      row.learnedAtEnd === undefined ? '-' : `${row.learnedAtEnd} (${row.probeFallbacks ?? 0} polls)`,
    // The variants' own columns, where the row has their figures (a table shows a column any of its rows has).
    ...(row.variant === 'learned' || row.variant === 'configured' || row.viewChanges === undefined
      ? {}
      : { 'view changes (to probe)': `${row.viewChanges} (${row.probeReturns ?? 0})` }),
    ...(row.phases ? { 'parts: used, busiest, 429 (not yet named)': phasesText(row.phases) } : {}),
    ...(row.adoptions
      ? {
          'adopted s': row.adoptions
            .map(
              (a) => `${limitText(a.to)}: ${a.seconds === undefined ? 'never' : `${a.seconds} (${a.shown})`}`,
            )
            .join('; '),
        }
      : {}),
    ...(row.liar
      ? {
          'liar: longest hold s, window it reported s (released s after its last report; listed s)': `${row.liar.longestHoldSeconds.toFixed(0)}, ${row.liar.reportedWindowSeconds.toFixed(0)} (${row.liar.releaseSeconds === undefined ? 'held at the end' : row.liar.releaseSeconds.toFixed(0)}; ${row.liar.longestListedSeconds.toFixed(0)})`,
        }
      : {}),
  };
}
