import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { softThresholdSeconds } from '../tokens/thresholds.js';
import type { CredentialSetState } from '../tokens/token-state.js';
import type { TokenStore } from '../tokens/token-store.js';

export type StateSource = 'memory' | 'store';

interface Entry {
  state: CredentialSetState | undefined;
  readAt: number;
}

/**
 * The warm path: each set's state as last read from the tokens table, kept in the function's memory.
 * An entry is served for `ttlMs`; once its current token is inside the set's soft-threshold window (the
 * refresher may already have replaced it) only for `nearThresholdTtlMs`, so consumers move to the new token
 * promptly without every request reading DynamoDB. Concurrent reads of one set share one store read.
 */
export class TokenStateCache {
  readonly #store: Pick<TokenStore, 'read'>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #nearThresholdTtlMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #reads = new Map<string, Promise<CredentialSetState | undefined>>();

  constructor(options: {
    store: Pick<TokenStore, 'read'>;
    clock: Clock;
    ttlMs: number;
    nearThresholdTtlMs: number;
  }) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs;
    this.#nearThresholdTtlMs = Math.min(options.nearThresholdTtlMs, options.ttlMs);
  }

  /** The cached state when still fresh enough, else a read of the store. */
  async get(
    set: CredentialSetConfig,
  ): Promise<{ state: CredentialSetState | undefined; source: StateSource }> {
    const entry = this.#entries.get(set.id);
    const now = this.#clock.now();
    if (entry && now - entry.readAt < this.#ttlFor(set, entry.state, now)) {
      return { state: entry.state, source: 'memory' };
    }
    return { state: await this.read(set.id), source: 'store' };
  }

  /** Always reads the store (joining a read already under way) and remembers the answer. */
  read(setId: string): Promise<CredentialSetState | undefined> {
    const pending = this.#reads.get(setId);
    if (pending) return pending;
    const readAt = this.#clock.now();
    const read = this.#store
      .read(setId, readAt)
      .then((state) => {
        const known = this.#entries.get(setId);
        // A slower read must not overwrite what a newer one already saw.
        if (!known?.state || !state || state.version >= known.state.version) {
          this.#entries.set(setId, { state, readAt });
        }
        return state;
      })
      .finally(() => this.#reads.delete(setId));
    this.#reads.set(setId, read);
    return read;
  }

  #ttlFor(set: CredentialSetConfig, state: CredentialSetState | undefined, now: number): number {
    const current = state?.current;
    if (!current) return 0; // nothing usable cached: always look again
    const leftMs = current.exp * 1000 - now;
    return leftMs <= softThresholdSeconds(set) * 1000 ? this.#nearThresholdTtlMs : this.#ttlMs;
  }
}
