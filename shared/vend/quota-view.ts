import type { Clock } from '../clock.js';
import type { RateLimitSettings } from '../config/credential-sets.js';
import type { RateLedger, WindowRemaining } from '../ledger/index.js';

/**
 * What is left of a token's quota, for the token answer. The figures are advice (permits are the authority,
 * and other consumers spend meanwhile), so they are kept in memory for `ttlMs` per token: a busy warm path
 * then costs at most one ledger read per token per interval instead of one per request. Anything this process
 * changes in the ledger for a token (grant, give-back, vendor report) drops its entry at once.
 */
export class QuotaView {
  readonly #ledger: RateLedger;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, { remaining: WindowRemaining[]; readAt: number }>();
  readonly #reads = new Map<string, Promise<WindowRemaining[]>>();

  constructor(options: { ledger: RateLedger; clock: Clock; ttlMs: number }) {
    this.#ledger = options.ledger;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs;
  }

  remaining(tokenId: string, limits: RateLimitSettings, setId?: string): Promise<WindowRemaining[]> {
    const entry = this.#entries.get(tokenId);
    if (entry && this.#clock.now() - entry.readAt < this.#ttlMs) return Promise.resolve(entry.remaining);
    const pending = this.#reads.get(tokenId);
    if (pending) return pending;
    const readAt = this.#clock.now();
    const read = this.#ledger
      .remaining(tokenId, limits, setId)
      .then((remaining) => {
        if (this.#ttlMs > 0) {
          // Bounded: tokens come and go every few hours, a handful per set.
          if (this.#entries.size >= 256) this.#entries.clear();
          this.#entries.set(tokenId, { remaining, readAt });
        }
        return remaining;
      })
      .finally(() => this.#reads.delete(tokenId));
    this.#reads.set(tokenId, read);
    return read;
  }

  invalidate(tokenId: string): void {
    this.#entries.delete(tokenId);
  }
}
