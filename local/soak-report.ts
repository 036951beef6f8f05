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
