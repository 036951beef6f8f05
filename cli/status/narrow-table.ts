import { formatDuration, formatWindow, table } from '../format.js';
import type { Cause } from './diagnose.js';
import { expiresCell, type StatusEntry } from './render.js';

/** The width of the narrow table when stdout is not a terminal (a pipe, a log, a CI job). */
export const NARROW_DEFAULT_WIDTH = 100;

/** How long ago the set's token was last refreshed: the token's age. */
function ageCell(entry: StatusEntry, nowMs: number): string {
  if (entry.refreshedAt === null) return 'never';
  return formatDuration(Math.max(0, (nowMs - Date.parse(entry.refreshedAt)) / 1000));
}

/**
 * `25/50 1m, 25/1000 1h`: the general windows only. Class windows and the parts of reservations are in
 * `--wide`; an older broker's "used" is an upper bound (≤).
 */
function quotaCell(entry: StatusEntry): string {
  const general = entry.quota?.filter((w) => w.class === undefined) ?? [];
  if (general.length === 0) return '-';
  return general
    .map(
      (w) =>
        `${w.used === null ? `≤${w.limit - w.remaining}` : w.used}/${w.limit} ${formatWindow(w.windowSeconds)}`,
    )
    .join(', ');
}

/**
 * Each cause as its code and runbook section (the words are in `--wide`); with `short`, the runbook section
 * alone where there is one (the state mostly says the rest). A cause with neither: its words.
 */
function causeCell(causes: Cause[], short: boolean): string {
  return causes
    .map((c) => {
      const section = c.runbook ? `#${c.runbook}` : null;
      return (short && section) || [c.code, section].filter(Boolean).join(' ') || c.summary;
    })
    .join('; ');
}

/** The line cut to `width` characters, the cut marked. */
export function clip(line: string, width: number): string {
  return line.length <= width ? line : `${line.slice(0, Math.max(0, width - 1))}…`;
}

/**
 * The table on-call reads first, within `width` characters: per set its state, how long its token has left and
 * how old it is, the quota used in each general window, and the cause as codes and runbook sections. The cause
 * comes last: where the whole line does not fit, it keeps the runbook sections only, and then is cut.
 */
export function narrowStatusTable(entries: StatusEntry[], nowMs: number, width: number): string {
  const rows = entries.map((e) => [e.id, e.state, expiresCell(e), ageCell(e, nowMs), quotaCell(e)]);
  const full = entries.map((e) => causeCell(e.causes, false));
  const lines = table(
    ['SET', 'STATE', 'EXPIRES IN', 'AGE', 'QUOTA USED', 'CAUSE'],
    rows.map((row, i) => [...row, full[i] ?? '']),
  ).split('\n');
  return lines
    .map((line, i) => {
      const entry = i === 0 ? undefined : entries[i - 1];
      if (!entry || line.length <= width) return clip(line, width);
      // The cause is the last column, unpadded: the line is its columns, then the cause.
      const columns = line.slice(0, line.length - (full[i - 1] ?? '').length);
      return clip(`${columns}${causeCell(entry.causes, true)}`, width);
    })
    .join('\n');
}
