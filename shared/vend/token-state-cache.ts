import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { tokenThresholds } from '../tokens/thresholds.js';
import { type CredentialSetState, validitySeconds } from '../tokens/token-state.js';
import type { TokenStore } from '../tokens/token-store.js';

export type StateSource = 'memory' | 'store';

interface Entry {
  state: CredentialSetState | undefined;
  readAt: number;
  /** When the store last confirmed this entry's version (a read or a version check). */
  checkedAt: number;
}

/** The store as the cache needs it: `readVersion`, when there, makes the version check possible. */
export type CacheStore = Pick<TokenStore, 'read'> & Partial<Pick<TokenStore, 'readVersion'>>;

/**
 * The warm path: each set's state as last read from the tokens table, kept in the function's memory.
 * An entry is served for `ttlMs`; once its current token is inside its soft-threshold window (the refresher
 * may already have replaced it) only for `nearThresholdTtlMs`. In between, every `versionCheckMs` the item's
 * version alone is read (one small consistent read): a re-login anywhere, such as one after a consumer's
 * rejection report to another instance, is seen within that interval instead of the whole TTL. Concurrent
 * reads (and checks) of one set share one store call.
 */
export class TokenStateCache {
  readonly #store: CacheStore;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #nearThresholdTtlMs: number;
  readonly #versionCheckMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #reads = new Map<string, Promise<CredentialSetState | undefined>>();
  readonly #checks = new Map<string, Promise<number | undefined>>();

  constructor(options: {
    store: CacheStore;
    clock: Clock;
    ttlMs: number;
    nearThresholdTtlMs: number;
    /** 0 or a store without `readVersion`: no version checks, entries live their TTL. */
    versionCheckMs?: number;
  }) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs;
    this.#nearThresholdTtlMs = Math.min(options.nearThresholdTtlMs, options.ttlMs);
    this.#versionCheckMs = options.store.readVersion ? (options.versionCheckMs ?? 0) : 0;
  }

  /** The cached state when still fresh enough (and, when due, its version confirmed), else a read of the store. */
  async get(
    set: CredentialSetConfig,
  ): Promise<{ state: CredentialSetState | undefined; source: StateSource }> {
    const entry = this.#entries.get(set.id);
    const now = this.#clock.now();
    if (entry && now - entry.readAt < this.#ttlFor(set, entry.state, now)) {
      if (this.#versionCheckMs === 0 || now - entry.checkedAt < this.#versionCheckMs) {
        return { state: entry.state, source: 'memory' };
      }
      let version: number | undefined;
      try {
        version = await this.#checkVersion(set.id);
      } catch {
        // The table did not answer: the entry is still inside its TTL, as good as it was without the check.
        return { state: entry.state, source: 'memory' };
      }
      const known = this.#entries.get(set.id);
      if (known && version === known.state?.version) {
        known.checkedAt = Math.max(known.checkedAt, now);
        return { state: known.state, source: 'memory' };
      }
    }
    return { state: await this.read(set.id), source: 'store' };
  }

  #checkVersion(setId: string): Promise<number | undefined> {
    const pending = this.#checks.get(setId);
    if (pending) return pending;
    const check = (this.#store.readVersion as NonNullable<CacheStore['readVersion']>)
      .call(this.#store, setId)
      .finally(() => this.#checks.delete(setId));
    this.#checks.set(setId, check);
    return check;
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
          this.#entries.set(setId, { state, readAt, checkedAt: readAt });
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
    const near = validitySeconds(current, now) <= tokenThresholds(set, current).softSeconds;
    return near ? this.#nearThresholdTtlMs : this.#ttlMs;
  }
}
