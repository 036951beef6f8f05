import { PROBE_LIMIT } from '../../shared/ledger/learned-limits.js';
import { formatRelative, formatWindow } from '../format.js';
import type { SetHealthView } from './list-health.js';

/** One limit of a class as the broker's status lists it (list-route.ts, ClassLimitView). */
export interface ClassLimitEntry {
  limit: number;
  windowSeconds: number;
  source: 'configured' | 'learned';
  learnedAt?: string;
  provisionalUntil?: string;
  /** A rise adopted it: the kept limit it replaced (docs/class-limits.md, R3). */
  raisedFrom?: number;
  /** A rise of this kept limit under trial: held to `limit` per its window since `since` (R2). */
  trial?: { limit: number; reportedLimit: number; since: string };
}

/** A set's classes: `learned` when configured with no limits (docs/class-limits.md). */
export type ClassesEntry = Record<string, { learned: boolean; limits: ClassLimitEntry[] }>;

const isLimit = (value: unknown): value is ClassLimitEntry => {
  const l = value as ClassLimitEntry;
  return (
    typeof l?.limit === 'number' &&
    typeof l.windowSeconds === 'number' &&
    (l.source === 'configured' || l.source === 'learned')
  );
};

const isTrial = (value: unknown): value is NonNullable<ClassLimitEntry['trial']> => {
  const t = value as ClassLimitEntry['trial'];
  return (
    typeof t?.limit === 'number' &&
    typeof t.reportedLimit === 'number' &&
    typeof t.since === 'string' &&
    Number.isFinite(Date.parse(t.since))
  );
};

/** A well-formed limit without the parts of it that are not (an older or a newer broker's). */
function limitOf(l: ClassLimitEntry): ClassLimitEntry {
  const { raisedFrom, trial, ...rest } = l;
  return {
    ...rest,
    ...(typeof raisedFrom === 'number' ? { raisedFrom } : {}),
    ...(isTrial(trial)
      ? { trial: { limit: trial.limit, reportedLimit: trial.reportedLimit, since: trial.since } }
      : {}),
  };
}

/**
 * The set's `classes` from the broker's answer, keeping only well-formed entries (an older broker sends none:
 * undefined). Read here rather than in the client's schema: only the operator's status shows them.
 */
export function classesOf(set: SetHealthView): ClassesEntry | undefined {
  const raw = (set as { classes?: unknown }).classes;
  if (!raw || typeof raw !== 'object') return undefined;
  const out: ClassesEntry = {};
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    const entry = value as { learned?: unknown; limits?: unknown };
    if (!Array.isArray(entry?.limits)) continue;
    out[name] = { learned: entry.learned === true, limits: entry.limits.filter(isLimit).map(limitOf) };
  }
  return out;
}

/**
 * `reports 5 per 1m learned 2m ago (one caller's word until in 40s)`, `20 per 1m learned 10s ago (raised from
 * 10)`, `10 per 1m learned 1h ago (trying 11 per 1m above the kept 10 since 2m ago: 20 reported)`, or
 * `rebalancing learning (probe)`.
 */
function classLine(name: string, entry: ClassesEntry[string], nowMs: number): string {
  // Nothing learned yet: the ledger holds the class to its probe (docs/class-limits.md, "The probe").
  const probe = `learning (probe: ${PROBE_LIMIT.limit} per ${formatWindow(PROBE_LIMIT.windowSeconds)})`;
  if (entry.limits.length === 0) return `${name} ${entry.learned ? probe : '-'}`;
  const limits = entry.limits.map((l) => {
    const window = formatWindow(l.windowSeconds);
    const notes = [
      l.provisionalUntil &&
        `one caller's word until ${formatRelative(Date.parse(l.provisionalUntil), nowMs)}`,
      l.raisedFrom !== undefined && `raised from ${l.raisedFrom}`,
      l.trial &&
        `trying ${l.trial.limit} per ${window} above the kept ${l.limit} since ${formatRelative(Date.parse(l.trial.since), nowMs)}: ${l.trial.reportedLimit} reported`,
    ].filter((note) => typeof note === 'string' && note !== '');
    const when = l.learnedAt ? ` ${formatRelative(Date.parse(l.learnedAt), nowMs)}` : '';
    return `${l.limit} per ${window} ${l.source}${when}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`;
  });
  return `${name} ${limits.join(', ')}`;
}

/**
 * The "classes" section printed after the status table: per set with classes, each class's limits, configured
 * or learned, and when learned. Empty when no set has a class.
 */
export function classesSection(entries: { id: string; classes?: ClassesEntry }[], nowMs: number): string {
  const lines = entries.flatMap((e) =>
    e.classes && Object.keys(e.classes).length > 0
      ? [
          `  ${e.id}: ${Object.entries(e.classes)
            .map(([name, entry]) => classLine(name, entry, nowMs))
            .join('; ')}`,
        ]
      : [],
  );
  return lines.length === 0 ? '' : `CLASSES\n${lines.join('\n')}\n`;
}
