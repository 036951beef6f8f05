import { ConfigurationError } from '../errors.js';

// The settings of the retry policy (retry.ts) apart from the policy: the vendor client's request types (types.ts)
// carry them, and the policy reads the vendor's typed errors (errors.ts), which name a type of types.ts; kept in
// one module, the three would import each other in a circle.

/**
 * The vendor's retry rules (vendor-api.md §7, §8): back off exponentially on 500/502/503/504,
 * network failures and timeouts; on 429 wait `Retry-After`; never retry other 4xx. Bounded by a
 * number of attempts and by a total time budget on the injected clock.
 */
export interface RetrySettings {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  baseDelayMs: number;
  /** Cap of one backoff wait (not of a vendor-requested `Retry-After`). */
  maxDelayMs: number;
  /** Total time from the first attempt; a wait that would end past it is not taken. */
  budgetMs: number;
  /** Uniform in [0, 1). */
  random: () => number;
}

/**
 * How long one attempt may take (real time, the answer's body included) before the client abandons it: so an
 * answer the client accepted came back within this of its request leaving (a bound shared/tokens/vendor-offset.ts
 * relies on).
 */
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;

export const DEFAULT_RETRY_SETTINGS: Readonly<RetrySettings> = Object.freeze({
  maxAttempts: 4,
  baseDelayMs: 200,
  maxDelayMs: 5000,
  budgetMs: 20_000,
  random: Math.random,
});

/** Defaults overlaid with `overrides`; a wrong value fails here with a message that names it. */
export function resolveRetrySettings(overrides: Partial<RetrySettings> = {}): RetrySettings {
  const settings: RetrySettings = { ...DEFAULT_RETRY_SETTINGS };
  for (const [key, value] of Object.entries(overrides)) {
    if (value !== undefined) Object.assign(settings, { [key]: value });
  }
  const wrong: string[] = [];
  if (!Number.isInteger(settings.maxAttempts) || settings.maxAttempts < 1)
    wrong.push('maxAttempts (integer >= 1)');
  for (const key of ['baseDelayMs', 'maxDelayMs', 'budgetMs'] as const) {
    if (!Number.isFinite(settings[key]) || settings[key] < 0) wrong.push(`${key} (finite number >= 0)`);
  }
  if (typeof settings.random !== 'function') wrong.push('random (function)');
  if (wrong.length > 0) throw new ConfigurationError(`invalid retry settings: ${wrong.join(', ')}`);
  return settings;
}

/** FULL jitter: uniform in [0, min(cap, base·2^retryIndex)]; retryIndex 0 is the wait after the first failure. */
export function fullJitterDelayMs(retryIndex: number, settings: RetrySettings): number {
  const ceiling = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** retryIndex);
  return Math.floor(settings.random() * (ceiling + 1));
}
