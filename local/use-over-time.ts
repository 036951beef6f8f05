/**
 * Quota use over time, for the charts of the soak and of the reservations bench: at each sample time t, the share
 * of a limit that the events in the window ending at t took, (t - window, t], the span a vendor's sliding window
 * counts. 100 % is the limit reached; above it, the vendor refuses.
 */

export interface CountAt {
  /** Epoch ms (or any ms scale shared with `from` and `to`). */
  time: number;
  count: number;
}

export interface UsePoint {
  /** Seconds since `from`. */
  seconds: number;
  /** Of the limit, in the window ending then. */
  usedPct: number;
}

/** Samples every `stepMs` from `from` to `to` (both included). */
export function useOverTime(
  events: readonly CountAt[],
  limit: { limit: number; windowMs: number },
  from: number,
  to: number,
  stepMs: number,
): UsePoint[] {
  if (!(stepMs > 0)) throw new Error(`stepMs must be positive, not ${stepMs}`);
  const sorted = [...events].sort((a, b) => a.time - b.time);
  const points: UsePoint[] = [];
  let first = 0;
  let next = 0;
  let inWindow = 0;
  for (let t = from; t <= to; t += stepMs) {
    for (; next < sorted.length && (sorted[next]?.time ?? 0) <= t; next++)
      inWindow += sorted[next]?.count ?? 0;
    for (; first < next && (sorted[first]?.time ?? 0) <= t - limit.windowMs; first++)
      inWindow -= sorted[first]?.count ?? 0;
    points.push({
      seconds: Number(((t - from) / 1000).toFixed(3)),
      usedPct: Number(((100 * inWindow) / limit.limit).toFixed(1)),
    });
  }
  return points;
}
