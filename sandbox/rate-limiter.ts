import type { SandboxLimit, WindowKind } from './settings.js';

/** What the vendor tells the caller in X-RateLimit-* (§8), for the most constrained window. */
export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix seconds when that window has room again. */
  reset: number;
}

export type RateLimitVerdict =
  | { allowed: true; headers: RateLimitState | undefined }
  | { allowed: false; headers: RateLimitState; retryAfterSeconds: number };

/** One quota a request counts against: its log's key and its limits. */
export interface Quota {
  key: string;
  limits: SandboxLimit[];
}

export type CombinedVerdict =
  | { allowed: true; headers: (RateLimitState | undefined)[] }
  | {
      allowed: false;
      /** Indexes of the refusing quota and of its limit. */
      quota: number;
      limit: number;
      headers: RateLimitState;
      retryAfterSeconds: number;
    };

interface WindowView {
  limit: number;
  used: number;
  /** Epoch ms when this window next gains room. */
  roomAt: number;
}

/** First index whose value is greater than `value` (strict) or not less than it, in an ascending array. */
function bound(values: number[], value: number, strict: boolean): number {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = values[mid] as number;
    if (v < value || (strict && v === value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
const firstAbove = (values: number[], value: number) => bound(values, value, true);
const firstAtOrAbove = (values: number[], value: number) => bound(values, value, false);

/**
 * The vendor's per-token quotas (general and per endpoint family). One ascending log of counted request times per key serves both kinds
 * (a fixed window is "entries since floor(now/W)*W", a sliding one "entries after now-W"), so limits
 * and the kind can change while the sandbox runs without losing what was counted.
 */
export class RateLimiter {
  readonly #logs = new Map<string, number[]>();

  /** Counts the request if every limit has room; otherwise rejects it without counting it. */
  consume(key: string, nowMs: number, limits: SandboxLimit[], kind: WindowKind): RateLimitVerdict {
    const verdict = this.consumeAll([{ key, limits }], nowMs, kind);
    if (!verdict.allowed)
      return { allowed: false, headers: verdict.headers, retryAfterSeconds: verdict.retryAfterSeconds };
    return { allowed: true, headers: verdict.headers[0] };
  }

  /**
   * One request that several quotas count (the general limits and an endpoint family's): counted in every one
   * when every limit of every quota has room, in none otherwise. A refusal names the quota and the limit that
   * has room latest (what Retry-After must cover); an acceptance gives each quota's most constrained window.
   */
  consumeAll(quotas: readonly Quota[], nowMs: number, kind: WindowKind): CombinedVerdict {
    const views = quotas.map(({ key, limits }) => {
      const log = limits.length === 0 ? [] : this.#prunedLog(key, nowMs, limits);
      return { log, before: limits.map((l) => this.#view(log, nowMs, l, kind)) };
    });
    let blocking: { quota: number; limit: number; view: WindowView } | undefined;
    views.forEach(({ before }, quota) => {
      before.forEach((view, limit) => {
        if (view.used >= view.limit && (!blocking || view.roomAt > blocking.view.roomAt))
          blocking = { quota, limit, view };
      });
    });
    if (blocking) {
      const { view } = blocking;
      return {
        allowed: false,
        quota: blocking.quota,
        limit: blocking.limit,
        headers: { limit: view.limit, remaining: 0, reset: Math.ceil(view.roomAt / 1000) },
        retryAfterSeconds: Math.max(1, Math.ceil((view.roomAt - nowMs) / 1000)),
      };
    }
    const headers = quotas.map(({ key, limits }, index) => {
      if (limits.length === 0) return undefined;
      const log = views[index]?.log ?? [];
      log.splice(firstAbove(log, nowMs), 0, nowMs);
      this.#logs.set(key, log);
      const after = limits.map((l) => this.#view(log, nowMs, l, kind));
      const tightest = after.reduce((a, b) => {
        const ra = a.limit - a.used;
        const rb = b.limit - b.used;
        return rb < ra || (rb === ra && b.roomAt > a.roomAt) ? b : a;
      });
      return {
        limit: tightest.limit,
        remaining: Math.max(0, tightest.limit - tightest.used),
        reset: Math.ceil(tightest.roomAt / 1000),
      };
    });
    return { allowed: true, headers };
  }

  clear(): void {
    this.#logs.clear();
  }

  #prunedLog(key: string, nowMs: number, limits: SandboxLimit[]): number[] {
    const log = this.#logs.get(key) ?? [];
    const longestMs = Math.max(...limits.map((l) => l.windowSeconds * 1000));
    // Nothing older than the longest window can count in either kind (a fixed window starts after now-W).
    const stale = firstAbove(log, nowMs - longestMs);
    if (stale > 0) log.splice(0, stale);
    return log;
  }

  #view(log: number[], nowMs: number, { limit, windowSeconds }: SandboxLimit, kind: WindowKind): WindowView {
    const windowMs = windowSeconds * 1000;
    if (kind === 'fixed') {
      const start = Math.floor(nowMs / windowMs) * windowMs;
      return { limit, used: log.length - firstAtOrAbove(log, start), roomAt: start + windowMs };
    }
    // Sliding: the window is (now-W, now]; an entry at t stops counting at t+W.
    const first = firstAbove(log, nowMs - windowMs);
    const used = log.length - first;
    // Room for one more once the entry that makes the count reach the limit has aged out.
    const freeing = used >= limit ? log[first + used - limit] : log[first];
    return { limit, used, roomAt: freeing === undefined ? nowMs : freeing + windowMs };
  }
}
