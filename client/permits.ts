import type { Clock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import type { Telemetry } from '../shared/telemetry.js';
import { BatchGiveBacks } from './batch-give-backs.js';
import type { BrokerApi } from './broker-api.js';
import { BrokerApiError, ClientClosedError, PermitDeadlineError, RequestAbortedError } from './errors.js';
import { PermitHandle } from './permit-handle.js';
import { type Batch, type GrantRoom, PermitPool } from './permit-pool.js';
import { abortable } from './token-cache.js';
import type { PermitPriority, QuotaWindow } from './types.js';

export interface PermitsOptions {
  api: BrokerApi;
  clock: Clock;
  telemetry: Telemetry;
  maxBatchSize: number;
  safetyMs: number;
  maxWaitMs: number;
  /** Spreads the wake-ups of waiters after a denial a little (uniform in [0, 1)). */
  random: () => number;
}

const keyOf = (setId: string, tokenId: string, cls: string | undefined) =>
  `${setId}\u0000${tokenId}\u0000${cls ?? ''}`;
/** Most a denied pool's retry is delayed beyond Retry-After, so waiters of many processes do not collide. */
const DENIAL_JITTER_MS = 200;

const quotaWindows = (value: unknown): QuotaWindow[] | undefined =>
  Array.isArray(value)
    ? value.filter(
        (w): w is QuotaWindow =>
          typeof w === 'object' &&
          w !== null &&
          typeof w.remaining === 'number' &&
          typeof w.limit === 'number',
      )
    : undefined;

/** The broker's 400 for a count above what one grant can ever give this caller (`details.maxCount`: that most). */
const countTooLarge = (error: unknown): error is BrokerApiError =>
  error instanceof BrokerApiError &&
  error.status === 400 &&
  error.code === 'INVALID_VALUE' &&
  error.details?.field === 'count';

/**
 * Rate permits from the broker's ledger in small adaptive batches (see PermitPool), one grant in flight per
 * pool, denials waited out on the clock within each caller's deadline. Unused permits go back to the ledger
 * (with the grant's receipt) when they are about to lapse, when the token changes, after a vendor 429 and
 * on close.
 *
 * A batch goes back in one give-back, with the permits its holders gave back (BatchGiveBacks).
 */
export class Permits {
  readonly #options: PermitsOptions;
  readonly #pools = new Map<string, PermitPool>();
  readonly #giveBacks: BatchGiveBacks;
  readonly #closing = new AbortController();

  constructor(options: PermitsOptions) {
    this.#options = options;
    this.#giveBacks = new BatchGiveBacks({
      api: options.api,
      clock: options.clock,
      telemetry: options.telemetry,
      closing: this.#closing.signal,
    });
  }

  async acquire(
    setId: string,
    tokenId: string,
    options: {
      class?: string | undefined;
      priority?: PermitPriority | undefined;
      signal?: AbortSignal | undefined;
      maxWaitMs?: number | undefined;
    } = {},
  ): Promise<PermitHandle> {
    this.#checkOpen(options.signal);
    const { clock } = this.#options;
    const deadline = clock.now() + (options.maxWaitMs ?? this.#options.maxWaitMs);
    const signal = options.signal
      ? AbortSignal.any([options.signal, this.#closing.signal])
      : this.#closing.signal;
    // A pool with waiters is never dropped (see PermitPool.idle) before close(), which ends every wait.
    const pool = this.#pool(setId, tokenId, options.class);
    const ticket = pool.enqueue(options.priority ?? 'interactive');
    try {
      let waited = false;
      for (;;) {
        this.#checkOpen(options.signal);
        const now = clock.now();
        this.#giveBacks.finish(pool, pool.removeLapsed(now));
        if (pool.available > 0) {
          if (pool.isTurn(ticket)) {
            const { batch } = pool.take(now);
            if (batch) {
              return new PermitHandle(
                {
                  credentialSet: setId,
                  tokenId,
                  ...(options.class ? { class: options.class } : {}),
                  grantedAt: batch.grantedAt,
                  validUntil: batch.validUntil,
                },
                (how) => this.#giveBacks.settle(pool, batch, how),
              );
            }
          }
          // Permits in hand, but a caller served before this one (an earlier one, or an interactive one before a
          // batch one) waits for them: wait for it to take its permit or leave, until the deadline. Past the
          // deadline, still wait when enough are in hand for every caller ahead and this one (they take theirs
          // within this turn of the event loop).
          if (now >= deadline && pool.ahead(ticket) >= pool.available) {
            throw new PermitDeadlineError(
              `no permit for credential set ${setId} before the deadline; callers served first took them`,
              1,
            );
          }
          await this.#waitForChange(pool, deadline, signal, options.signal);
          waited = true;
          continue;
        }
        if (waited && now >= deadline && !pool.granting && pool.deniedUntil <= now) {
          // Grants keep arriving lapsed (the broker answers slower than the permits last), or callers served
          // first keep taking them: give up in time.
          throw new PermitDeadlineError(
            `no usable permit for credential set ${setId} before the deadline`,
            1,
          );
        }
        if (pool.granting) {
          waited = true;
          await abortable(pool.granting, signal).catch((error: unknown) =>
            this.#rethrow(error, options.signal),
          );
          continue;
        }
        if (pool.deniedUntil > now) {
          if (pool.deniedUntil > deadline) {
            const retryAfterSeconds = Math.ceil((pool.deniedUntil - now) / 1000);
            throw new PermitDeadlineError(
              `no permit for credential set ${setId} before the deadline; room in about ${retryAfterSeconds} s`,
              retryAfterSeconds,
            );
          }
          // Woken early when permits land (a grant that was on its way when the vendor said 429).
          await this.#waitForChange(pool, pool.deniedUntil, signal, options.signal);
          continue;
        }
        pool.granting = this.#grant(pool, pool.nextCount(now)).finally(() => {
          pool.granting = undefined;
        });
        // Every waiter hears of a failed grant; if none is left to hear it, it is not an unhandled rejection.
        pool.granting.catch(() => undefined);
      }
    } finally {
      pool.leave(ticket);
    }
  }

  /** Until the pool changes (a caller left, permits landed) or the clock reaches `until`, whichever is first. */
  async #waitForChange(
    pool: PermitPool,
    until: number,
    signal: AbortSignal,
    callerSignal: AbortSignal | undefined,
  ): Promise<void> {
    const stop = new AbortController();
    const timer = this.#options.clock.sleep(
      Math.max(0, until - this.#options.clock.now()),
      AbortSignal.any([signal, stop.signal]),
    );
    timer.catch(() => undefined);
    try {
      await Promise.race([abortable(pool.changed, signal), timer]);
    } catch (error) {
      this.#rethrow(error, callerSignal);
    } finally {
      stop.abort();
    }
  }

  /** The quota windows the ledger last reported for this token's permits of `cls`. */
  lastKnownWindows(
    setId: string,
    tokenId: string,
    cls: string | undefined,
  ): readonly QuotaWindow[] | undefined {
    return this.#pools.get(keyOf(setId, tokenId, cls))?.windows;
  }

  /** The token is no longer this process's: give its unused permits back. */
  releaseToken(setId: string, tokenId: string): void {
    for (const pool of this.#poolsOf(setId, tokenId)) {
      this.#giveBacks.finish(pool, pool.drain());
      if (pool.idle) this.#pools.delete(keyOf(pool.setId, pool.tokenId, pool.cls));
    }
  }

  /** The vendor answered 429: permits in hand would only meet more 429s; back they go, and no grant until then. */
  vendorRateLimited(setId: string, tokenId: string, retryAfterMs: number): void {
    const until = this.#options.clock.now() + retryAfterMs;
    for (const pool of this.#poolsOf(setId, tokenId)) {
      this.#giveBacks.finish(pool, pool.drain());
      pool.denied(until);
    }
  }

  /** Stops handing out permits, gives every unused one back, and waits for the give-backs to finish. */
  async close(): Promise<void> {
    this.#closing.abort(new ClientClosedError('the broker client was closed'));
    // A grant still on its way gives its permits back when it lands (see #grant): wait for it too.
    await Promise.allSettled([...this.#pools.values()].map((pool) => pool.granting));
    for (const pool of this.#pools.values()) this.#giveBacks.finish(pool, pool.drain());
    this.#pools.clear();
    await this.#giveBacks.close();
  }

  async #grant(pool: PermitPool, count: number): Promise<void> {
    const { api, clock, safetyMs } = this.#options;
    // The grant happens after this moment: counting its validity from here is safe whatever the clocks say.
    const askedAt = clock.now();
    try {
      const grant = await api.acquirePermits(pool.setId, { tokenId: pool.tokenId, count, class: pool.cls });
      const validityMs = grant.validUntil - grant.grantedAt;
      if (validityMs <= safetyMs) {
        throw new ConfigurationError(
          `permitSafetyMs (${safetyMs}) must be below the permit validity the broker grants (${validityMs} ms)`,
        );
      }
      const batch: Batch = {
        grantedAt: grant.grantedAt,
        validUntil: grant.validUntil,
        receipt: grant.receipt,
        // On this clock from the ask, not from the broker's timestamps: a client clock ahead of the broker's
        // would see every batch lapsed on arrival, one behind would send too late; and a slow answer eats
        // into the validity instead of extending it.
        usableUntil: askedAt + validityMs - safetyMs,
        left: grant.granted,
        timer: new AbortController(),
        endsAt: askedAt + validityMs,
        out: 0,
        returned: 0,
        spent: false,
      };
      if (this.#closing.signal.aborted) {
        this.#giveBacks.finish(pool, [batch]);
        return;
      }
      pool.add(batch, { windows: grant.remaining, available: grant.available, maxCount: grant.maxCount });
      // Given back just before it lapses; the timer stops early when the batch is used up or drained.
      clock.sleep(Math.max(0, batch.usableUntil - clock.now()), batch.timer.signal).then(
        () => this.#giveBacks.finish(pool, pool.removeLapsed(clock.now())),
        () => undefined,
      );
    } catch (error) {
      if (countTooLarge(error) && count > 1) {
        // More than one grant can ever give this caller (a reservation elsewhere leaves it less shared than the
        // batch grew to): never the caller's failure. Ask for what the broker says is possible.
        const fewer = pool.tooLarge(count, error.details?.maxCount);
        this.#options.telemetry.debug('permit batch too large; asking for fewer', {
          credentialSet: pool.setId,
          tokenId: pool.tokenId,
          count,
          fewer,
        });
        return this.#grant(pool, fewer);
      }
      if (!(error instanceof BrokerApiError) || error.status !== 429) throw error;
      const room: GrantRoom = {
        windows: quotaWindows(error.details?.remaining),
        available: error.details?.available,
        maxCount: error.details?.maxCount,
      };
      pool.heard(room);
      const remaining = pool.room;
      // Denied whole because the ask was too big: what remains can be had at once.
      if (remaining !== undefined && remaining >= 1 && remaining < count) {
        pool.denied(0);
        return this.#grant(pool, remaining);
      }
      // Retry-After is whole seconds (rounded up); a broker that also says the exact wait is taken at its word.
      const exactMs = error.details?.retryAfterMs;
      const waitMs =
        (typeof exactMs === 'number' && Number.isFinite(exactMs) && exactMs > 0
          ? exactMs
          : (error.retryAfterSeconds ?? 1) * 1000) + Math.floor(this.#options.random() * DENIAL_JITTER_MS);
      pool.denied(clock.now() + waitMs);
      this.#options.telemetry.debug('permits denied', {
        credentialSet: pool.setId,
        tokenId: pool.tokenId,
        count,
        reason: error.details?.reason,
        retryAfterSeconds: error.retryAfterSeconds,
      });
    }
  }

  #pool(setId: string, tokenId: string, cls: string | undefined): PermitPool {
    const key = keyOf(setId, tokenId, cls);
    let pool = this.#pools.get(key);
    if (!pool) {
      pool = new PermitPool(setId, tokenId, cls, this.#options.maxBatchSize);
      this.#pools.set(key, pool);
    }
    return pool;
  }

  #poolsOf(setId: string, tokenId: string): PermitPool[] {
    return [...this.#pools.values()].filter((pool) => pool.setId === setId && pool.tokenId === tokenId);
  }

  #checkOpen(signal: AbortSignal | undefined): void {
    if (this.#closing.signal.aborted) throw new ClientClosedError('the broker client was closed');
    if (signal?.aborted)
      throw new RequestAbortedError('permit wait aborted by the caller', { cause: signal.reason });
  }

  #rethrow(error: unknown, signal: AbortSignal | undefined): never {
    if (this.#closing.signal.aborted) throw new ClientClosedError('the broker client was closed');
    if (signal?.aborted)
      throw new RequestAbortedError('permit wait aborted by the caller', { cause: signal.reason });
    throw error;
  }
}
