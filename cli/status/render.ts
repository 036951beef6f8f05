import { formatDuration, formatRelative, formatWindow, table } from '../format.js';
import { type ClassesEntry, classesOf } from './class-limits.js';
import type { ConsumerPermits } from './consumer-permits.js';
import { type Cause, diagnose } from './diagnose.js';
import type { SetHealthView } from './list-health.js';

/** A part of a window with reservations: granted from it in the window (plus the margin), and what is left. */
export interface QuotaPartView {
  limit: number;
  used: number;
  remaining: number;
}

export interface QuotaWindowView {
  limit: number;
  windowSeconds: number;
  /** Granted in the window (plus the ledger's margin); null from a broker that does not say. */
  used: number | null;
  remaining: number;
  class?: string;
  /** Only on a general window with reservations: the part they leave shared. */
  shared?: QuotaPartView;
  /** The same: each reserved consumer's part, by its configured name. */
  reservations?: (QuotaPartView & { consumer: string })[];
}

const partView = (part: QuotaPartView): QuotaPartView => ({
  limit: part.limit,
  used: part.used,
  remaining: part.remaining,
});

export interface StatusEntry {
  id: string;
  environment: string;
  companyRole: string;
  state: string;
  /** Unix seconds, null without a token. */
  expiresAt: number | null;
  expiresInSeconds: number | null;
  refreshedAt: string | null;
  lastError: { code: string; at: string; requestId?: string } | null;
  consecutiveFailures: number | null;
  nextAttemptAt: string | null;
  rateLimitedUntil: string | null;
  quota: QuotaWindowView[] | null;
  /** Each class's limits, configured or learned (only for a set with classes, from a broker that says). */
  classes?: ClassesEntry;
  causes: Cause[];
  /**
   * With `--consumers`: each consumer's permits over the window (CloudWatch); null when CloudWatch could not
   * be read. Absent without the option.
   */
  consumerPermits?: { windowSeconds: number; consumers: ConsumerPermits[] } | null;
}

/** The status of each set as `--json` prints it: the broker's health plus the diagnosis. */
export function statusEntries(sets: SetHealthView[], nowMs: number): StatusEntry[] {
  return sets.map((set) => {
    const { health } = set;
    const classes = classesOf(set);
    return {
      id: set.id,
      environment: set.environment,
      companyRole: set.companyRole,
      state: health.state,
      expiresAt: health.expiresAt,
      // The broker's figure is on the vendor's clock; an older broker's answer is counted on ours.
      expiresInSeconds:
        health.expiresAt === null
          ? null
          : (health.expiresInSeconds ?? Math.max(0, Math.floor(health.expiresAt - nowMs / 1000))),
      refreshedAt: health.refreshedAt ?? null,
      lastError: health.lastError,
      consecutiveFailures: health.consecutiveFailures ?? null,
      nextAttemptAt: health.nextAttemptAt ?? null,
      rateLimitedUntil: health.rateLimitedUntil ?? null,
      quota:
        set.quota?.map((w) => ({
          limit: w.limit,
          windowSeconds: w.windowSeconds,
          used: w.used ?? null,
          remaining: w.remaining,
          ...(w.class === undefined ? {} : { class: w.class }),
          ...(w.shared === undefined ? {} : { shared: partView(w.shared) }),
          ...(w.reservations === undefined
            ? {}
            : { reservations: w.reservations.map((r) => ({ consumer: r.consumer, ...partView(r) })) }),
        })) ?? null,
      ...(classes === undefined ? {} : { classes }),
      causes: diagnose(set, nowMs),
    };
  });
}

/**
 * ` (order-service 20/23, 3 left; shared 5/27, 22 left)` after a window with reservations: each reserved
 * consumer's part and the shared part, granted/limit and what is left; nothing after any other window.
 */
function reservedCell(w: QuotaWindowView): string {
  if (!w.shared && !w.reservations?.length) return '';
  const part = (name: string, p: QuotaPartView) => `${name} ${p.used}/${p.limit}, ${p.remaining} left`;
  const parts = [
    ...(w.reservations ?? []).map((r) => part(r.consumer, r)),
    ...(w.shared ? [part('shared', w.shared)] : []),
  ];
  return ` (${parts.join('; ')})`;
}

function quotaCell(entry: StatusEntry): string {
  if (!entry.quota) return '-';
  return entry.quota
    .map((w) => {
      // An older broker sends only what is left: what was used is then at most limit - remaining.
      const used = w.used === null ? `≤${w.limit - w.remaining}` : String(w.used);
      return `${w.class ? `${w.class} ` : ''}${used}/${w.limit} per ${formatWindow(w.windowSeconds)}${reservedCell(w)}`;
    })
    .join(', ');
}

function causeCell(causes: Cause[]): string {
  return causes.map((c) => (c.runbook ? `${c.summary} [runbook #${c.runbook}]` : c.summary)).join('; ');
}

export function expiresCell(entry: StatusEntry): string {
  if (entry.expiresAt === null || entry.expiresInSeconds === null) return '-';
  return entry.expiresInSeconds <= 0 ? 'expired' : formatDuration(entry.expiresInSeconds);
}

/** When the refresher may next try to log in, if a backoff or a credentials cooldown holds it back. */
function nextAttemptCell(entry: StatusEntry, nowMs: number): string {
  const next = entry.nextAttemptAt === null ? Number.NaN : Date.parse(entry.nextAttemptAt);
  return next > nowMs ? `in ${formatDuration((next - nowMs) / 1000)}` : '-';
}

/** `portfolio 10/3/2, batch 40/10/6`: granted/returned/denied per consumer, busiest first. */
function consumersCell(entry: StatusEntry): string {
  if (entry.consumerPermits === null) return 'unknown';
  const consumers = entry.consumerPermits?.consumers ?? [];
  if (consumers.length === 0) return 'none';
  return consumers.map((c) => `${c.consumer} ${c.granted}/${c.returned}/${c.denied}`).join(', ');
}

/**
 * The wide table (`--wide`): one line per set, every column, the cause in words last. With
 * `consumersWindowSeconds` (`--consumers`), a column of each consumer's permits granted/returned/denied over
 * that window. The narrow default is narrow-table.ts.
 */
export function statusTable(
  entries: StatusEntry[],
  nowMs: number,
  options: { consumersWindowSeconds?: number } = {},
): string {
  const withConsumers = options.consumersWindowSeconds !== undefined;
  const rows = entries.map((e) => [
    e.id,
    e.environment,
    e.state,
    expiresCell(e),
    e.refreshedAt === null ? 'never' : formatRelative(Date.parse(e.refreshedAt), nowMs),
    e.lastError ? `${e.lastError.code} ${formatRelative(Date.parse(e.lastError.at), nowMs)}` : '-',
    e.lastError?.requestId ?? '-',
    nextAttemptCell(e, nowMs),
    quotaCell(e),
    ...(withConsumers ? [consumersCell(e)] : []),
    causeCell(e.causes),
  ]);
  return table(
    [
      'SET',
      'ENV',
      'STATE',
      'EXPIRES IN',
      'LAST REFRESH',
      'LAST ERROR',
      'VENDOR REQUEST ID',
      'NEXT ATTEMPT',
      'QUOTA USED',
      ...(withConsumers
        ? [
            `PERMITS PER CONSUMER (${formatWindow(options.consumersWindowSeconds ?? 0)}) granted/returned/denied`,
          ]
        : []),
      'CAUSE',
    ],
    rows,
  );
}
