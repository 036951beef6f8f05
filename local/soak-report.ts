/**
 * Arithmetic of the soak report: what the vendor's limits allow, and the busiest span of a record.
 * Spans here are half-open, [t, t + window), as a vendor counts them; the ledger's tests count closed spans
 * of window + margin (test/support/ledger-harness.ts), the ledger's own promise.
 * Pure functions, so the soak's verdicts can be checked on their own.
 */

export interface LimitMs {
  limit: number;
  windowMs: number;
}

/**
 * The most requests any scheduler could send in [startMs, endMs] without any span of a limit's length
 * holding more than that limit, for every limit at once (the sliding-window reading of the vendor's quota,
 * the strictest one). Sending each request as early as the limits allow is optimal, so this greedy count is
 * the true maximum.
 */
export function mostAllowed(limits: readonly LimitMs[], startMs: number, endMs: number): number {
  const times: number[] = [];
  for (;;) {
    let t = times.at(-1) ?? startMs;
    for (const { limit, windowMs } of limits) {
      const back = times[times.length - limit];
      if (back !== undefined) t = Math.max(t, back + windowMs);
    }
    if (t > endMs) return times.length;
    times.push(t);
  }
}

/** The most entries of a sorted list of times that fall in one half-open span [t, t + spanMs). */
export function busiestSpan(sortedTimes: readonly number[], spanMs: number): number {
  let best = 0;
  let first = 0;
  for (let last = 0; last < sortedTimes.length; last++) {
    while ((sortedTimes[last] ?? 0) - (sortedTimes[first] ?? 0) >= spanMs) first++;
    best = Math.max(best, last - first + 1);
  }
  return best;
}

/** One answer of the broker to a consumer's permit ask, on the soak's clock (ledger and clients share it). */
export interface AskRecord {
  /** When the ask left and when its answer came. */
  sentAt: number;
  at: number;
  count: number;
  granted: number;
  /** Ledger time of a grant. */
  grantedAt?: number;
  /** The ledger's reason of a denial. */
  reason?: string;
}

/**
 * The denials for QUOTA of one reserved consumer's asks that its reservation covered: for every window it holds
 * a reservation in, its own grants that the ledger can still count at the ask (granted in the window plus the
 * margin plus one slot before the ask was sent, up to its answer; the ledger's ring counts a slot that is partly
 * in the span in full) plus the ask are at most the reservation. The ledger promises no such denial (docs/design.md,
 * "Reservations"). Conservative towards the ledger: grants given back or made on another token are counted too.
 */
export function quotaDenialsWithinReservation(
  asks: readonly AskRecord[],
  reservation: Readonly<Record<string, number>>,
  marginMs: number,
  slotMsOf: (windowMs: number) => number,
): number {
  const grants = asks.filter((ask) => ask.granted > 0 && ask.grantedAt !== undefined);
  return asks.filter(
    (ask) =>
      ask.granted === 0 &&
      ask.reason === 'QUOTA' &&
      Object.entries(reservation).every(([windowSeconds, reserved]) => {
        const windowMs = Number(windowSeconds) * 1000;
        const from = ask.sentAt - windowMs - marginMs - slotMsOf(windowMs);
        const held = grants
          .filter((g) => (g.grantedAt ?? 0) >= from && (g.grantedAt ?? 0) <= ask.at)
          .reduce((sum, g) => sum + g.granted, 0);
        return held + ask.count <= reserved;
      }),
  ).length;
}

/** The p-th percentile (nearest rank) of a list; 0 for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

/** A request as the vendor sandbox logged it (sandbox/request-log.ts), as much of it as a span check needs. */
export interface VendorLogEntry {
  at: number;
  quotaKey: string;
  family?: string;
  served: boolean;
}

/** A quota's limits: the general ones (`family` undefined) or an endpoint family's. */
export interface QuotaLimits {
  family: string | undefined;
  limits: readonly { limit: number; windowSeconds: number }[];
}

/** The busiest span of one limit of one quota, over every quota key (token or user) the vendor counted. */
export interface SpanFigure {
  family: string | undefined;
  limit: number;
  windowSeconds: number;
  busiest: number;
}

/**
 * The vendor-side bound, from the vendor's own log of served requests: for each quota (the general limits count
 * every request, a family's only its own) and each of its limits, the most requests served to one quota key in
 * any half-open span of the limit's window. A figure above its limit is a span the vendor should never have
 * let through on a sliding reading (on fixed windows the vendor itself admits up to twice the limit across a
 * boundary: the span check is what holds the broker to the strict reading there).
 */
export function busiestSpans(log: readonly VendorLogEntry[], quotas: readonly QuotaLimits[]): SpanFigure[] {
  const served = log.filter((entry) => entry.served);
  return quotas.flatMap(({ family, limits }) => {
    const byKey = new Map<string, number[]>();
    for (const entry of served) {
      if (family !== undefined && entry.family !== family) continue;
      const times = byKey.get(entry.quotaKey);
      if (times) times.push(entry.at);
      else byKey.set(entry.quotaKey, [entry.at]);
    }
    return limits.map(({ limit, windowSeconds }) => ({
      family,
      limit,
      windowSeconds,
      busiest: Math.max(
        0,
        ...[...byKey.values()].map((times) =>
          busiestSpan(
            [...times].sort((a, b) => a - b),
            windowSeconds * 1000,
          ),
        ),
      ),
    }));
  });
}

/** The figures of busiestSpans above their limit, as messages; empty when every span kept its bound. */
export function spanExcesses(figures: readonly SpanFigure[]): string[] {
  return figures
    .filter((figure) => figure.busiest > figure.limit)
    .map(
      (figure) =>
        `${figure.family ?? 'general'} ${figure.limit}/${figure.windowSeconds}s: ${figure.busiest} served in one span`,
    );
}
