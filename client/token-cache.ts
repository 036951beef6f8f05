import type { Clock } from '../shared/clock.js';
import type { Telemetry } from '../shared/telemetry.js';
import type { BrokerApi } from './broker-api.js';
import { RequestAbortedError } from './errors.js';
import type { VendedToken } from './types.js';

/** The vendor's rule: re-login 5 minutes before `exp`; no token is used closer to its end than that. */
export const MIN_VALIDITY_FLOOR_SECONDS = 300;
/**
 * A token that came from the broker with less than the margin to spare is still used (it has the validity asked
 * for) for this long before the broker is asked again, so such a token cannot turn every call into a vend request.
 */
const RECHECK_MS = 5000;
/** Rejected token ids remembered per set, so a late answer cannot bring one back. */
const REMEMBERED_REJECTIONS = 16;

export type RejectionCode = 'TOKEN_EXPIRED' | 'TOKEN_INVALID';

/** Waits for a shared promise, but lets this caller stop waiting when its signal fires. */
export function abortable<T>(shared: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  // The shared work may fail after every waiter has gone: that must not become an unhandled rejection.
  shared.catch(() => undefined);
  if (!signal) return shared;
  if (signal.aborted)
    return Promise.reject(new RequestAbortedError('aborted by the caller', { cause: signal.reason }));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new RequestAbortedError('aborted by the caller', { cause: signal.reason }));
    signal.addEventListener('abort', onAbort, { once: true });
    shared.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * The tokens of this process, per credential set. A token is reused until
 * `expiresAt − max(minValiditySeconds, 300) − margin − spread`, or until a vendor call reports it rejected;
 * concurrent callers share one vend request (single-flight), and concurrent rejections of one token one report.
 * `spread` is drawn once per cache: every process holds the same token with the same `expiresAt`, and without
 * it all of them would ask the broker for the next one in the same second.
 */
export class TokenCache {
  readonly #api: BrokerApi;
  readonly #clock: Clock;
  readonly #marginMs: number;
  /** This cache's extra lead before the margin, in [0, spreadSeconds]: only ever leaves a token earlier. */
  readonly #spreadMs: number;
  readonly #floorSeconds: number;
  readonly #telemetry: Telemetry;
  readonly #onReplaced: (setId: string, oldTokenId: string) => void;
  readonly #tokens = new Map<string, VendedToken>();
  readonly #fetching = new Map<string, Promise<VendedToken>>();
  readonly #reporting = new Map<string, Promise<VendedToken>>();
  readonly #rejected = new Map<string, string[]>();

  constructor(options: {
    api: BrokerApi;
    clock: Clock;
    marginSeconds: number;
    /** Bound of the switch-over spread (default 0: none). */
    spreadSeconds?: number;
    /** Uniform in [0, 1): draws the spread, once. */
    random?: () => number;
    /** The least validity a token is used with (the vendor's 5-minute rule; lower only in compressed time). */
    floorSeconds?: number;
    telemetry: Telemetry;
    /** Called when a set's token is replaced or dropped (its unused permits are given back). */
    onReplaced: (setId: string, oldTokenId: string) => void;
  }) {
    this.#api = options.api;
    this.#clock = options.clock;
    this.#marginMs = options.marginSeconds * 1000;
    const spreadMaxMs = (options.spreadSeconds ?? 0) * 1000;
    const draw = spreadMaxMs > 0 ? (options.random ?? Math.random)() : 0;
    this.#spreadMs = Math.min(spreadMaxMs, Math.max(0, Math.floor(draw * (spreadMaxMs + 1))));
    this.#floorSeconds = options.floorSeconds ?? MIN_VALIDITY_FLOOR_SECONDS;
    this.#telemetry = options.telemetry;
    this.#onReplaced = options.onReplaced;
  }

  async get(
    setId: string,
    options: {
      minValiditySeconds?: number | undefined;
      forceRefresh?: boolean | undefined;
      signal?: AbortSignal | undefined;
    } = {},
  ): Promise<VendedToken> {
    const floorMs = Math.max(options.minValiditySeconds ?? 0, this.#floorSeconds) * 1000;
    const needMs = floorMs + this.#marginMs + this.#spreadMs;
    const cached = this.#tokens.get(setId);
    if (!options.forceRefresh && cached) {
      if (this.#fits(cached, needMs)) return cached;
      const recent = this.#clock.now() - cached.receivedAt < RECHECK_MS;
      if (recent && this.#fits(cached, floorMs)) return cached;
    }
    // A joined fetch may have been asked with a smaller minValiditySeconds: then ask once more, ourselves.
    // (The validity asked for, not the margin and spread: the answer is the broker's newest token already.)
    let pending = this.#fetching.get(setId);
    if (pending) {
      const token = await abortable(pending, options.signal);
      if (this.#fits(token, floorMs)) return token;
    }
    // Unless asked otherwise, the broker applies the vendor's rule itself; a lowered floor must be said.
    const ask =
      options.minValiditySeconds ??
      (this.#floorSeconds === MIN_VALIDITY_FLOOR_SECONDS ? undefined : Math.ceil(this.#floorSeconds));
    pending = this.#fetching.get(setId) ?? this.#fetch(setId, ask);
    return abortable(pending, options.signal);
  }

  /** The token a vendor call rejected (401): report it once; the broker answers the token to use now. */
  async afterRejection(
    setId: string,
    rejected: Pick<VendedToken, 'tokenId'>,
    errorCode: RejectionCode,
    vendorRequestId: string | undefined,
    signal?: AbortSignal,
  ): Promise<VendedToken> {
    const current = this.#tokens.get(setId);
    // Another call already reported it and took the replacement.
    if (
      current &&
      current.tokenId !== rejected.tokenId &&
      this.#fits(current, MIN_VALIDITY_FLOOR_SECONDS * 1000)
    ) {
      return current;
    }
    const key = `${setId}\u0000${rejected.tokenId}`;
    let pending = this.#reporting.get(key);
    if (!pending) {
      this.#forget(setId, rejected.tokenId);
      pending = this.#api
        .reportRejection(setId, { tokenId: rejected.tokenId, errorCode, requestId: vendorRequestId })
        .then((token) => {
          this.#telemetry.info('token rejection reported', {
            credentialSet: setId,
            rejectedTokenId: rejected.tokenId,
            errorCode,
            tokenId: token.tokenId,
            reloggedIn: token.reloggedIn,
          });
          return this.#keep(setId, token);
        })
        .finally(() => this.#reporting.delete(key));
      this.#reporting.set(key, pending);
    }
    return abortable(pending, signal);
  }

  /**
   * Whether the token still has the floor left (the vendor's rule), now: a token taken before a wait (for a
   * permit, after a 429) may have gone below it by the time it would be sent.
   */
  usable(token: VendedToken): boolean {
    return this.#fits(token, this.#floorSeconds * 1000);
  }

  /**
   * Whether the set's newest token answer lists `cls` as a learned class (its answers renew what was learned).
   * The classes are the set's, the same in the answers for its current and previous tokens.
   */
  learned(setId: string, cls: string): boolean {
    return this.#tokens.get(setId)?.classes?.some((c) => c.class === cls && c.learned) === true;
  }

  /** Drops the token (the broker said it is no longer live); the next get asks the broker. */
  invalidate(setId: string, tokenId: string): void {
    this.#forget(setId, tokenId);
  }

  #fetch(setId: string, minValiditySeconds: number | undefined): Promise<VendedToken> {
    const pending = this.#api
      .getToken(setId, minValiditySeconds)
      .then((token) => {
        this.#telemetry.debug('token vended', {
          credentialSet: setId,
          tokenId: token.tokenId,
          expiresAt: token.expiresAt,
        });
        return this.#keep(setId, token);
      })
      .finally(() => this.#fetching.delete(setId));
    this.#fetching.set(setId, pending);
    return pending;
  }

  /**
   * Keeps the newer of the cached token and an arriving one (a slow answer must not replace a newer token), and
   * never one that was reported rejected. Returns the token to use.
   */
  #keep(setId: string, token: VendedToken): VendedToken {
    if (this.#rejected.get(setId)?.includes(token.tokenId)) return this.#tokens.get(setId) ?? token;
    const cached = this.#tokens.get(setId);
    if (cached && cached.tokenId !== token.tokenId && cached.expiresAtMs > token.expiresAtMs) return cached;
    this.#tokens.set(setId, token);
    if (cached && cached.tokenId !== token.tokenId) this.#onReplaced(setId, cached.tokenId);
    return token;
  }

  #forget(setId: string, tokenId: string): void {
    const remembered = [...(this.#rejected.get(setId) ?? []), tokenId].slice(-REMEMBERED_REJECTIONS);
    this.#rejected.set(setId, remembered);
    if (this.#tokens.get(setId)?.tokenId === tokenId) {
      this.#tokens.delete(setId);
      this.#onReplaced(setId, tokenId);
    }
  }

  #fits(token: VendedToken, needMs: number): boolean {
    return token.expiresAtMs - this.#clock.now() >= needMs;
  }
}
