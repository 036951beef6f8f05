import type { Clock } from '../clock.js';
import { ConfigurationError } from '../errors.js';
import { VendorCallAbortedError, VendorError } from './errors.js';

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

/** What the policy needs to know about one failure. */
export interface RetryAdvice {
  retryable: boolean;
  /** A wait the server asked for (Retry-After); replaces the backoff wait. */
  retryAfterMs?: number;
}

/** The vendor's rules, read from the typed errors: `retryable` and a 429's `retryAfterSeconds`. */
export function vendorRetryAdvice(error: unknown): RetryAdvice {
  if (!(error instanceof VendorError) || !error.retryable) return { retryable: false };
  const retryAfterSeconds = (error as { retryAfterSeconds?: unknown }).retryAfterSeconds;
  return typeof retryAfterSeconds === 'number' && Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0
    ? { retryable: true, retryAfterMs: retryAfterSeconds * 1000 }
    : { retryable: true };
}

export interface RetryEvent {
  /** 1-based number of the attempt that failed. */
  attempt: number;
  error: unknown;
  delayMs: number;
  elapsedMs: number;
}

export interface RetryOptions {
  clock: Clock;
  settings?: Partial<RetrySettings>;
  signal?: AbortSignal;
  /** How to judge a failure; default `vendorRetryAdvice`. */
  advise?: (error: unknown) => RetryAdvice;
  /** Called before each wait (for logs); must not throw. */
  onRetry?: (event: RetryEvent) => void;
}

/**
 * Runs `operation` (given the 1-based attempt number) until it succeeds, fails with something not
 * retryable, runs out of attempts, or the next wait would overrun the budget: then the last error is
 * thrown as it was. An abort of `signal` during a wait becomes `VendorCallAbortedError`.
 */
export async function withRetry<T>(
  operation: (attempt: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const settings = resolveRetrySettings(options.settings);
  const advise = options.advise ?? vendorRetryAdvice;
  const { clock, signal } = options;
  const startedAt = clock.now();
  for (let attempt = 1; ; attempt++) {
    throwIfAborted(signal);
    try {
      return await operation(attempt);
    } catch (error) {
      if (attempt >= settings.maxAttempts) throw error;
      const advice = advise(error);
      if (!advice.retryable || signal?.aborted) throw error;
      const delayMs = advice.retryAfterMs ?? fullJitterDelayMs(attempt - 1, settings);
      const elapsedMs = clock.now() - startedAt;
      if (elapsedMs + delayMs > settings.budgetMs) throw error;
      options.onRetry?.({ attempt, error, delayMs, elapsedMs });
      try {
        await clock.sleep(delayMs, signal);
      } catch (reason) {
        throw aborted(reason);
      }
    }
  }
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw aborted(signal.reason);
}

function aborted(reason: unknown): VendorCallAbortedError {
  return new VendorCallAbortedError('vendor call aborted by the caller', undefined, { cause: reason });
}
