import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { CredentialsSource } from '../credentials/credentials-source.js';
import { DIMENSION_CREDENTIAL_SET, Metric } from '../metric-names.js';
import { MetricUnit, type Telemetry } from '../observability.js';
import { mapBounded } from './bounded.js';
import { UnknownCredentialSetError } from './errors.js';
import { errorCodeOf } from './failure-policy.js';
import {
  type AttemptContext,
  type AttemptResult,
  attemptRefresh,
  type VendorLogin,
} from './refresh-attempt.js';
import { parseRefreshRequest, type RefreshOutcome, type RefreshRequest } from './refresh-request.js';
import { refreshDue, secondsUntil, tokenThresholds } from './thresholds.js';
import { type CredentialSetState, type TokenView, validitySeconds } from './token-state.js';
import type { TokenStore } from './token-store.js';
import type { DynamoClockEstimate } from './vendor-offset.js';

export interface RefresherOptions {
  sets: readonly CredentialSetConfig[];
  store: TokenStore;
  credentials: CredentialsSource;
  vendorFor(set: CredentialSetConfig): VendorLogin;
  clock: Clock;
  telemetry: Telemetry;
  /**
   * DynamoDB's clock as this process sees it, measured with `clock` (shared/aws/dynamodb-date-reference.ts on the
   * store's client): each login's vendor clock offset is then stored against the ledger's clock, DynamoDB's.
   * Unset: `clock` is taken as DynamoDB's (a simulated clock, which the engine's real Date would find far away).
   */
  dynamoClock?: DynamoClockEstimate;
  /** Sets refreshed at once by a scheduled run. */
  concurrency?: number;
  /** Names this process in leases; unique per process by default. */
  holderId?: string;
  /** How long an on-demand refresh waits for another process's login (on the clock). */
  onDemandWaitMs?: number;
  pollIntervalMs?: number;
}

export type SetRunAction = 'FRESH' | 'LOGGED_IN' | 'FAILED' | 'BLOCKED' | 'CONTENDED' | 'ERROR';

/** One set's part of a scheduled run. No token in it. */
export interface SetRunSummary {
  credentialSetId: string;
  action: SetRunAction;
  tokenId?: string;
  /** The current token's `exp` after the run, Unix seconds. */
  exp?: number;
  validitySeconds: number;
  usable: boolean;
  errorCode?: string;
}

export interface RunSummary {
  /** Epoch ms. */
  at: number;
  sets: SetRunSummary[];
}

/**
 * Keeps every credential set's token fresh: a scheduled run re-logs in each set that is due, and
 * `refreshOne` does it on demand for the vend API. Across processes a lease in the tokens table makes one
 * login per set at a time; inside a process, concurrent refreshes of one set run one after the other and
 * the later ones usually find the earlier one's token.
 */
export class Refresher {
  readonly #sets: Map<string, CredentialSetConfig>;
  readonly #options: RefresherOptions;
  readonly #context: Omit<AttemptContext, 'vendor'>;
  readonly #inflight = new Map<string, Promise<unknown>>();
  readonly #waitMs: number;
  readonly #pollMs: number;

  constructor(options: RefresherOptions) {
    this.#options = options;
    this.#sets = new Map(options.sets.map((set) => [set.id, set]));
    this.#waitMs = options.onDemandWaitMs ?? 8000;
    this.#pollMs = options.pollIntervalMs ?? 250;
    this.#context = {
      store: options.store,
      credentials: options.credentials,
      clock: options.clock,
      telemetry: options.telemetry,
      holder: options.holderId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
      ...(options.dynamoClock ? { dynamoClock: options.dynamoClock } : {}),
    };
  }

  async runScheduled(options: { signal?: AbortSignal } = {}): Promise<RunSummary> {
    const at = this.#options.clock.now();
    const sets = await mapBounded([...this.#sets.values()], this.#options.concurrency ?? 4, (set) =>
      this.#scheduledOne(set, options.signal).catch((error: unknown): SetRunSummary => {
        // One set's store outage must not stop the others.
        this.#options.telemetry.error('scheduled refresh failed', {
          credentialSetId: set.id,
          errorCode: errorCodeOf(error),
        });
        return {
          credentialSetId: set.id,
          action: 'ERROR',
          validitySeconds: 0,
          usable: false,
          errorCode: errorCodeOf(error),
        };
      }),
    );
    return { at, sets };
  }

  async refreshOne(input: RefreshRequest, options: { signal?: AbortSignal } = {}): Promise<RefreshOutcome> {
    const request = parseRefreshRequest(input);
    const set = this.#sets.get(request.credentialSetId);
    if (!set) throw new UnknownCredentialSetError(`unknown credential set "${request.credentialSetId}"`);
    return this.#exclusively(
      set.id,
      (state) => satisfied(set, request, state, this.#options.clock.now()),
      (state) => this.#onDemand(set, request, state, options.signal),
    );
  }

  async #scheduledOne(set: CredentialSetConfig, signal?: AbortSignal): Promise<SetRunSummary> {
    const { clock } = this.#options;
    let action: SetRunAction = 'FRESH';
    let errorCode: string | undefined;
    let state: CredentialSetState | undefined;
    await this.#exclusively<unknown>(
      set.id,
      (read) => {
        state = read;
        return refreshDue(read?.current, clock.now(), set) ? undefined : 'FRESH';
      },
      async (read) => {
        const result = await attemptRefresh(this.#attemptContext(set), set, read, signal);
        action = result.kind;
        errorCode = errorCodeOfAttempt(result);
        if (result.kind === 'LOGGED_IN')
          state = {
            ...(read ?? { credentialSetId: set.id, version: 0 }),
            current: { ...result.token, usable: true },
          };
        return result;
      },
    );
    const current = state?.current;
    const summary: SetRunSummary = {
      credentialSetId: set.id,
      action,
      validitySeconds: validitySeconds(current, clock.now()),
      usable: current?.usable ?? false,
    };
    if (current) Object.assign(summary, { tokenId: current.tokenId, exp: current.exp });
    if (errorCode) summary.errorCode = errorCode;
    this.#reportRun(summary);
    return summary;
  }

  /**
   * Runs `work` for a set with no other refresh of that set running in this process. Whoever waited on
   * another re-reads the store first, and usually finds an answer there (`answer`), so does not log in again.
   */
  async #exclusively<T>(
    setId: string,
    answer: (state: CredentialSetState | undefined) => T | undefined,
    work: (state: CredentialSetState | undefined) => Promise<T>,
  ): Promise<T> {
    for (;;) {
      for (let running = this.#inflight.get(setId); running; running = this.#inflight.get(setId)) {
        await running.catch(() => undefined);
      }
      const state = await this.#options.store.read(setId, this.#options.clock.now());
      const answered = answer(state);
      if (answered !== undefined) return answered;
      if (this.#inflight.has(setId)) continue; // another caller started meanwhile: wait for it instead
      const running = work(state);
      this.#inflight.set(setId, running);
      try {
        return await running;
      } finally {
        // Cleared whatever the outcome: a failure is never kept as the answer for later callers.
        this.#inflight.delete(setId);
      }
    }
  }

  async #onDemand(
    set: CredentialSetConfig,
    request: RefreshRequest,
    initial: CredentialSetState | undefined,
    signal?: AbortSignal,
  ): Promise<RefreshOutcome> {
    const { clock, store } = this.#options;
    const deadline = clock.now() + this.#waitMs;
    let state = initial;
    let result = await attemptRefresh(this.#attemptContext(set), set, state, signal);
    for (;;) {
      const now = clock.now();
      switch (result.kind) {
        case 'LOGGED_IN':
          return { status: 'CURRENT', tokenId: result.token.tokenId, exp: result.token.exp, loggedIn: true };
        case 'FAILED':
          return unavailable(result.failure.errorCode, result.failure.cooldownUntil, now);
        case 'BLOCKED':
          return whileBlocked(request, state, result, now);
      }
      // Another process is logging in: wait (bounded) for its token rather than log in again.
      if (now >= deadline) return unavailable('REFRESH_IN_PROGRESS', result.until ?? now, now);
      await clock.sleep(this.#pollMs, signal);
      state = await store.read(set.id, clock.now());
      const answered = satisfied(set, request, state, clock.now());
      if (answered) return answered;
      result = state?.lease
        ? { kind: 'CONTENDED', until: state.lease.expiresAt }
        : await attemptRefresh(this.#attemptContext(set), set, state, signal);
    }
  }

  #attemptContext(set: CredentialSetConfig): AttemptContext {
    return { ...this.#context, vendor: this.#options.vendorFor(set) };
  }

  #reportRun(summary: SetRunSummary): void {
    const { telemetry } = this.#options;
    const dimensions = { [DIMENSION_CREDENTIAL_SET]: summary.credentialSetId };
    telemetry.metric(Metric.TokenValiditySeconds, MetricUnit.Seconds, summary.validitySeconds, dimensions);
    telemetry.metric(Metric.NoUsableToken, MetricUnit.Count, summary.usable ? 0 : 1, dimensions);
    if (!summary.usable) telemetry.error('no usable token', { ...summary });
    else if (summary.action === 'FRESH') telemetry.debug('scheduled run', { ...summary });
    else telemetry.info('scheduled run', { ...summary });
  }
}

/** The answer an on-demand request can have without a login, if any. */
function satisfied(
  set: CredentialSetConfig,
  request: RefreshRequest,
  state: CredentialSetState | undefined,
  now: number,
): RefreshOutcome | undefined {
  const current = state?.current;
  if (!current?.usable) return undefined;
  if (request.reason === 'TOKEN_REJECTED') {
    return current.tokenId === request.rejectedTokenId ? undefined : currentOutcome(current);
  }
  // A token above its soft threshold is fresh by policy, whatever validity is asked for: a caller asking
  // for more than any token can give must not cause a login every storm-guard interval.
  const { softSeconds, hardFloorSeconds } = tokenThresholds(set, current);
  const required = Math.min(Math.max(request.minValiditySeconds ?? 0, hardFloorSeconds), softSeconds);
  const enough = validitySeconds(current, now) >= required;
  return enough ? currentOutcome(current) : undefined;
}

/** No attempt allowed now: say why and when, or, when the ask cannot be met sooner, the best token there is. */
function whileBlocked(
  request: RefreshRequest,
  state: CredentialSetState | undefined,
  result: Extract<AttemptResult, { kind: 'BLOCKED' }>,
  now: number,
): RefreshOutcome {
  if (result.failure) return unavailable(result.failure.errorCode, result.until, now);
  const current = state?.current;
  // An attempt within the storm-guard interval left no failure behind (its holder died mid-way): until the
  // guard passes, the usable token is the best there is.
  if (current?.usable && request.reason === 'NO_USABLE_TOKEN') {
    return currentOutcome(current);
  }
  return unavailable(
    request.reason === 'TOKEN_REJECTED' ? 'TOKEN_REJECTED' : 'NO_USABLE_TOKEN',
    result.until,
    now,
  );
}

const currentOutcome = (token: TokenView): RefreshOutcome => ({
  status: 'CURRENT',
  tokenId: token.tokenId,
  exp: token.exp,
  loggedIn: false,
});

const unavailable = (errorCode: string, until: number, now: number): RefreshOutcome => ({
  status: 'UNAVAILABLE',
  errorCode,
  retryAfterSeconds: secondsUntil(until, now),
});

function errorCodeOfAttempt(result: AttemptResult): string | undefined {
  return result.kind === 'FAILED' || result.kind === 'BLOCKED' ? result.failure?.errorCode : undefined;
}
