import type { Clock } from '../clock.js';
import { VendorCallAbortedError, VendorError } from './errors.js';
import { fullJitterDelayMs, type RetrySettings, resolveRetrySettings } from './retry-settings.js';

// The settings are the retry policy's API too: its callers import them from here.
export {
  DEFAULT_RETRY_SETTINGS,
  fullJitterDelayMs,
  type RetrySettings,
  resolveRetrySettings,
} from './retry-settings.js';

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
