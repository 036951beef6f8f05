import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { tokenThresholds } from '../tokens/thresholds.js';
import {
  type CredentialSetState,
  notExpired,
  type TokenView,
  validitySeconds,
} from '../tokens/token-state.js';
import type { RefreshInvoker, RefreshOutcome, RefreshRequest } from './refresh-invoker.js';
import { ReportLimitedError } from './report-limits.js';
import type { StateSource, TokenStateCache } from './token-state-cache.js';
import { causeOf, describeCause, type UnavailableCause } from './unavailable-cause.js';
import { TokenUnavailableError } from './vend-errors.js';

/** Where re-logins driven by rejection reports are claimed (the report limiter, shared by all containers). */
export interface ReloginGate {
  claim(
    setId: string,
    rejectedTokenId: string,
  ): Promise<{ ok: true; release(): Promise<void> } | { ok: false; retryAfterSeconds: number }>;
}

export type TokenSource = StateSource | 'refresh';

export interface ProvidedToken {
  token: TokenView;
  source: TokenSource;
  /** A login happened for this answer (through the refresher). */
  loggedIn: boolean;
}

/** When the refresher did not answer in time: ask again soon; the refresh itself goes on. */
const RETRY_AFTER_WAIT_TIMEOUT_SECONDS = 2;
/** When the refresher could not be asked at all. */
const RETRY_AFTER_REFRESHER_DOWN_SECONDS = 5;

class WaitTimeout extends Error {}

/**
 * Hands out tokens with enough validity left: from memory, else from the tokens table, else through one
 * re-login shared by everyone waiting for the set (single-flight here; across processes the refresher's
 * lease does the same), bounded by `refreshWaitMs`. After the refresher says UNAVAILABLE, it is not asked
 * again for that set until its Retry-After passes (the store is still read, so a token obtained elsewhere is
 * served at once): a busy vend function must not turn an outage into a stream of invokes.
 */
export class TokenProvider {
  readonly #cache: TokenStateCache;
  readonly #refresher: RefreshInvoker;
  readonly #clock: Clock;
  readonly #refreshWaitMs: number;
  readonly #inFlight = new Map<string, Promise<RefreshOutcome>>();
  readonly #quiet = new Map<string, { until: number; cause: UnavailableCause }>();

  constructor(options: {
    cache: TokenStateCache;
    refresher: RefreshInvoker;
    clock: Clock;
    refreshWaitMs: number;
  }) {
    this.#cache = options.cache;
    this.#refresher = options.refresher;
    this.#clock = options.clock;
    this.#refreshWaitMs = options.refreshWaitMs;
  }

  /** The set's state for health: the cached one when fresh enough. */
  async state(set: CredentialSetConfig): Promise<CredentialSetState | undefined> {
    return (await this.#cache.get(set)).state;
  }

  /**
   * The set's state as the tokens table has it now: one consistent GetItem, never the warm cache (whose
   * entry it refreshes for the vend path too). For status answers, where a login that failed a moment ago
   * must show.
   */
  freshState(set: CredentialSetConfig): Promise<CredentialSetState | undefined> {
    return this.#cache.read(set.id);
  }

  /**
   * A token with at least `minValiditySeconds` left on the vendor's clock (never less than the token's hard
   * floor; by default just that), or 503. A token above its own soft threshold is fresh by policy whatever is
   * asked, as the refresher decides: asking more than a short-lived token can give must not force logins.
   */
  async usableToken(set: CredentialSetConfig, minValiditySeconds?: number): Promise<ProvidedToken> {
    const cached = await this.#cache.get(set);
    const fromCache = this.#usable(set, cached.state, minValiditySeconds);
    if (fromCache) return { token: fromCache, source: cached.source, loggedIn: false };
    if (cached.source === 'memory') {
      const fresh = this.#usable(set, await this.#cache.read(set.id), minValiditySeconds);
      if (fresh) return { token: fresh, source: 'store', loggedIn: false };
    }
    const outcome = await this.#refresh(set, {
      credentialSetId: set.id,
      reason: 'NO_USABLE_TOKEN',
      minValiditySeconds: Math.max(minValiditySeconds ?? 0, set.refresh.hardFloorSeconds),
    });
    const state = await this.#cache.read(set.id);
    const after = this.#usable(set, state, minValiditySeconds);
    if (after) return { token: after, source: 'refresh', loggedIn: outcome.loggedIn };
    // The state just read says why: no second read for the cause.
    throw new TokenUnavailableError(set.id, causeOf(state), {
      retryAfterSeconds: RETRY_AFTER_WAIT_TIMEOUT_SECONDS,
    });
  }

  /**
   * A consumer's vendor call was refused with `rejectedTokenId`. Re-login only when that token is still the
   * current one; otherwise (it is the previous token, or older) the current token is the answer. With a
   * `gate`, the re-login must first be claimed from it (the set's bound on report-driven re-logins, shared
   * by all containers); a refused claim answers 429 with the time left, unless the token changed meanwhile.
   */
  async afterRejection(
    set: CredentialSetConfig,
    rejectedTokenId: string,
    gate?: ReloginGate,
  ): Promise<ProvidedToken> {
    const state = await this.#cache.read(set.id);
    if (state?.current?.tokenId !== rejectedTokenId) {
      return this.usableToken(set);
    }
    let release: (() => Promise<void>) | undefined;
    // Joining this process's re-login for the same token needs no claim of its own.
    if (gate && !this.#inFlight.has(`${set.id}#${rejectedTokenId}`)) {
      const claim = await gate.claim(set.id, rejectedTokenId);
      if (!claim.ok) {
        const now = this.#usable(set, await this.#cache.read(set.id));
        if (now && now.tokenId !== rejectedTokenId) return { token: now, source: 'store', loggedIn: false };
        // 429, not 503: nothing is down; the set had its report-driven re-login of the interval.
        throw new ReportLimitedError('the credential set was re-logged in after a rejection recently', {
          retryAfterSeconds: claim.retryAfterSeconds,
          details: { reason: 'RELOGIN_LIMIT' },
        });
      }
      release = claim.release;
    }
    // The claim is given back only when the refresher logged nobody in (UNAVAILABLE): an answer of CURRENT
    // without a login of ours means someone replaced the token, possibly for this very claim's reports.
    const outcome = await this.#refresh(
      set,
      { credentialSetId: set.id, reason: 'TOKEN_REJECTED', rejectedTokenId },
      release,
    );
    const after = await this.#cache.read(set.id);
    const current = this.#usable(set, after);
    if (current && current.tokenId !== rejectedTokenId) {
      return { token: current, source: 'refresh', loggedIn: outcome.loggedIn };
    }
    throw new TokenUnavailableError(set.id, causeOf(after), {
      retryAfterSeconds: RETRY_AFTER_WAIT_TIMEOUT_SECONDS,
    });
  }

  /**
   * An operator's forced re-login (`token-broker refresh`): the current token is replaced whatever its validity,
   * through the refresher like every other login, so however many ask at once there is one login: each asks to
   * replace the token it read, and the refresher answers the ones that come after the login with the new token.
   * Not held back by an earlier UNAVAILABLE of this container (the operator may just have fixed the password);
   * the refresher's own guards (one attempt a minute per set, a failure's cooldown) still apply. A token logged
   * in less than that minute ago is the answer as it is; no new token (a failed login, one in progress, or an
   * attempt the guards hold back) is a 503 with the cause and the time left, naming the token still served.
   */
  async forceRefresh(set: CredentialSetConfig): Promise<ProvidedToken & { replacedTokenId?: string }> {
    const before = this.#usable(set, await this.#cache.read(set.id));
    // Logged in less than the refresher's one attempt a minute ago: the newest token there can be, and most likely
    // the login of a refresh run at the same moment as this one (operators' runs start seconds apart).
    if (before && this.#clock.now() - before.obtainedAt < set.refresh.minAttemptIntervalSeconds * 1000) {
      return { token: before, source: 'store', loggedIn: false };
    }
    const request: RefreshRequest = before
      ? { credentialSetId: set.id, reason: 'TOKEN_REJECTED', rejectedTokenId: before.tokenId }
      : {
          credentialSetId: set.id,
          reason: 'NO_USABLE_TOKEN',
          minValiditySeconds: set.refresh.hardFloorSeconds,
        };
    const outcome = await this.#refreshOutcome(set, request);
    const after = await this.#cache.read(set.id);
    const current = this.#usable(set, after);
    if (outcome.status === 'CURRENT' && current && current.tokenId !== before?.tokenId) {
      return {
        token: current,
        source: 'refresh',
        loggedIn: outcome.loggedIn,
        ...(before ? { replacedTokenId: before.tokenId } : {}),
      };
    }
    const retryAfterSeconds =
      outcome.status === 'UNAVAILABLE' ? outcome.retryAfterSeconds : RETRY_AFTER_WAIT_TIMEOUT_SECONDS;
    const failed = outcome.status === 'UNAVAILABLE' ? outcome.errorCode : undefined;
    // A failed login (its cause), one in progress, or an attempt within the last minute that left no failure
    // (its holder stopped mid-way): a re-login is in progress as far as anyone can tell.
    throw new TokenUnavailableError(set.id, causeOf(after, failed), {
      retryAfterSeconds,
      ...(current ? { servedTokenId: current.tokenId } : {}),
    });
  }

  /**
   * The current or previous token of the set with this id, while it has not expired on the vendor's clock
   * (for permits, reports).
   */
  async liveToken(set: CredentialSetConfig, tokenId: string): Promise<TokenView | undefined> {
    const find = (state: CredentialSetState | undefined) =>
      [state?.current, state?.previous].find(
        (token) => token?.tokenId === tokenId && notExpired(token, this.#clock.now()),
      );
    const cached = await this.#cache.get(set);
    return (
      find(cached.state) ?? (cached.source === 'memory' ? find(await this.#cache.read(set.id)) : undefined)
    );
  }

  /**
   * The current token when the store marks it usable (judged again now: a cached state ages), and it has
   * what is asked left on the vendor's clock: at least its own hard floor, more when asked, up to its soft
   * threshold.
   */
  #usable(
    set: CredentialSetConfig,
    state: CredentialSetState | undefined,
    minValiditySeconds?: number,
  ): TokenView | undefined {
    const current = state?.current;
    const now = this.#clock.now();
    if (!current?.usable || now > current.usableUntil) return undefined;
    const { softSeconds, hardFloorSeconds } = tokenThresholds(set, current);
    const needSeconds = Math.min(Math.max(minValiditySeconds ?? 0, hardFloorSeconds), softSeconds);
    return validitySeconds(current, now) >= needSeconds ? current : undefined;
  }

  /** One refresh per set at a time in this process, waited for at most `refreshWaitMs` (on the clock). */
  async #refresh(
    set: CredentialSetConfig,
    request: RefreshRequest,
    /** Called when the refresher said UNAVAILABLE (or was not asked): no login came of this request. */
    noLogin?: () => Promise<void>,
  ): Promise<Extract<RefreshOutcome, { status: 'CURRENT' }>> {
    const quiet = this.#quiet.get(set.id);
    if (quiet && quiet.until > this.#clock.now()) {
      await noLogin?.();
      // The cause the refresher gave, for every caller until its Retry-After: not a vaguer one after the first.
      throw new TokenUnavailableError(set.id, quiet.cause, {
        retryAfterSeconds: (quiet.until - this.#clock.now()) / 1000,
      });
    }
    const outcome = await this.#refreshOutcome(set, request);
    if (outcome.status === 'UNAVAILABLE') {
      await noLogin?.();
      const cause = causeOf(await this.#stateForCause(set), outcome.errorCode);
      this.#quiet.set(set.id, {
        until: this.#clock.now() + Math.max(1, outcome.retryAfterSeconds) * 1000,
        cause,
      });
      throw new TokenUnavailableError(set.id, cause, { retryAfterSeconds: outcome.retryAfterSeconds });
    }
    this.#quiet.delete(set.id);
    return outcome;
  }

  /** The refresher's answer, shared by every caller of this process asking the same (single-flight). */
  async #refreshOutcome(set: CredentialSetConfig, request: RefreshRequest): Promise<RefreshOutcome> {
    const key = request.reason === 'TOKEN_REJECTED' ? `${set.id}#${request.rejectedTokenId}` : set.id;
    let shared = this.#inFlight.get(key);
    if (!shared) {
      shared = this.#refresher.refresh(request).finally(() => this.#inFlight.delete(key));
      // A waiter that gave up must not leave the rejection unhandled.
      shared.catch(() => undefined);
      this.#inFlight.set(key, shared);
    }
    return this.#waitBounded(set, shared);
  }

  /** The set's state to explain a 503 by; none when the store does not answer either. */
  async #stateForCause(set: CredentialSetConfig): Promise<CredentialSetState | undefined> {
    try {
      return await this.#cache.read(set.id);
    } catch {
      return undefined;
    }
  }

  async #waitBounded(set: CredentialSetConfig, shared: Promise<RefreshOutcome>): Promise<RefreshOutcome> {
    const timer = new AbortController();
    const timeout = this.#clock.sleep(this.#refreshWaitMs, timer.signal).then(
      () => {
        throw new WaitTimeout();
      },
      () => undefined as never, // aborted: the refresh answered first
    );
    try {
      return await Promise.race([shared, timeout]);
    } catch (error) {
      if (error instanceof WaitTimeout) {
        throw new TokenUnavailableError(
          set.id,
          causeOf(await this.#stateForCause(set), 'REFRESH_IN_PROGRESS'),
          {
            retryAfterSeconds: RETRY_AFTER_WAIT_TIMEOUT_SECONDS,
          },
        );
      }
      throw new TokenUnavailableError(set.id, describeCause('REFRESHER_UNAVAILABLE'), {
        retryAfterSeconds: RETRY_AFTER_REFRESHER_DOWN_SECONDS,
        cause: error,
      });
    } finally {
      timer.abort();
    }
  }
}
