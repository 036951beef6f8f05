/**
 * The vendor's side of a run, exactly: every request at its own timestamp, and per limit a sliding window
 * [t - window, t] (both ends closed) that counts the requests it accepted. A request that would make any window
 * hold more than its limit is refused (a 429) and counts in none. No slots, no margins: what the vendor sees.
 */
export interface WindowLimit {
  limit: number;
  windowMs: number;
}

export interface VendorCheck {
  /** Requests the vendor refused (429s): 0 when the broker kept every limit in every span. */
  rejected: number;
  /** Per limit (in the given order), the most requests sent in any span of its window, refused ones included. */
  mostInAnySpan: number[];
}

interface Window {
  limit: WindowLimit;
  /** Times of the accepted requests; `first` is the oldest still in the window. */
  accepted: number[];
  first: number;
  /** Index (in all requests) of the oldest request still in the window. */
  firstSent: number;
  most: number;
}

/** `sendTimes`: one entry per request (any order). */
export function checkVendorWindows(
  sendTimes: readonly number[],
  limits: readonly WindowLimit[],
): VendorCheck {
  const times = Float64Array.from(sendTimes).sort();
  const windows: Window[] = limits.map((limit) => ({ limit, accepted: [], first: 0, firstSent: 0, most: 0 }));
  let rejected = 0;
  times.forEach((t, i) => {
    let refuse = false;
    for (const w of windows) {
      const from = t - w.limit.windowMs;
      while (w.first < w.accepted.length && (w.accepted[w.first] ?? t) < from) w.first++;
      if (w.accepted.length - w.first >= w.limit.limit) refuse = true;
      while ((times[w.firstSent] ?? t) < from) w.firstSent++;
      w.most = Math.max(w.most, i - w.firstSent + 1);
    }
    if (refuse) rejected++;
    else for (const w of windows) w.accepted.push(t);
  });
  return { rejected, mostInAnySpan: windows.map((w) => w.most) };
}
