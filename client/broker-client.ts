import { type Clock, systemClock } from '../shared/clock.js';
import { vendorBaseUrlSchema } from '../shared/config/credential-sets.js';
import { ConfigurationError } from '../shared/errors.js';
import type { Telemetry } from '../shared/telemetry.js';
import { VendorClient } from '../shared/vendor-client/client.js';
import { InsecureVendorUrlError } from '../shared/vendor-client/errors.js';
import { resolveRetrySettings } from '../shared/vendor-client/retry.js';
import type { ResourceResponse } from '../shared/vendor-client/types.js';
import { parseVendorBaseUrl } from '../shared/vendor-client/vendor-url.js';
import { resolveCredentials, resolveRegion } from './aws-auth.js';
import { BrokerApi } from './broker-api.js';
import { ClientClosedError, InvalidClientRequestError } from './errors.js';
import type { PermitHandle } from './permit-handle.js';
import { Permits } from './permits.js';
import { afterVendorRateLimit, RateFeedback } from './rate-feedback.js';
import { RequestClassifier } from './request-classifier.js';
import { FunctionUrlSigner } from './sigv4.js';
import { TokenCache } from './token-cache.js';
import type {
  AcquirePermitOptions,
  BrokerClientOptions,
  CredentialSetSummary,
  ForcedRefresh,
  GetTokenOptions,
  RateLimitReportResult,
  ReportRateLimitOptions,
  TokenRejection,
  VendedToken,
  VendorAnswer,
  VendorRequestOptions,
} from './types.js';
import { readVendorAnswer } from './vendor-answer.js';
import { vendorCall } from './vendor-call.js';

/** A priority from plain JavaScript (or a cast) that is neither of the two fails the call, by name. */
function checkPriority(priority: unknown): void {
  if (priority !== undefined && priority !== 'interactive' && priority !== 'batch') {
    throw new InvalidClientRequestError("priority: must be 'interactive' or 'batch'");
  }
}

/** A token id as the broker vends it (first 16 hex of the token's sha256); anything else fails the call, by name. */
function checkTokenId(field: string, tokenId: unknown): void {
  if (typeof tokenId !== 'string' || !/^[0-9a-f]{16}$/.test(tokenId)) {
    throw new InvalidClientRequestError(`${field}: must be a token id as vended (16 lowercase hex)`);
  }
}

/** A 429 without Retry-After: the least wait the broker is told of (whole seconds). */
const RETRY_AFTER_UNSAID_SECONDS = 1;

const silent: Telemetry = { debug() {}, info() {}, warn() {}, error() {}, metric() {} };

/** An option's value or its default; a wrong one fails the construction, by name. */
function setting(
  name: string,
  value: number | undefined,
  fallback: number,
  rule: 'positive' | 'count' | 'nonNegative',
): number {
  const result = value ?? fallback;
  const ok =
    Number.isFinite(result) &&
    (rule === 'nonNegative' ? result >= 0 : result > 0) &&
    (rule !== 'count' || Number.isInteger(result));
  if (!ok) {
    const what = { positive: 'a number > 0', count: 'a whole number >= 1', nonNegative: 'a number >= 0' }[
      rule
    ];
    throw new ConfigurationError(`${name}: must be ${what}`);
  }
  return result;
}

function brokerBaseUrl(value: string): string {
  try {
    return parseVendorBaseUrl(value);
  } catch (error) {
    if (error instanceof InsecureVendorUrlError) {
      throw new ConfigurationError(
        `brokerUrl: ${error.message.replace(/^vendor base URL/, 'the broker URL')}`,
      );
    }
    throw error;
  }
}

/**
 * The broker for an internal service: tokens (cached in process until their soft threshold), permits (small
 * adaptive batches, unused ones given back), and vendor requests done by the vendor's rules with both, every
 * broker call signed with SigV4 for the Function URL. One client per process; `close()` on shutdown.
 */
export class BrokerClient {
  readonly #api: BrokerApi;
  readonly #clock: Clock;
  readonly #tokens: TokenCache;
  readonly #permits: Permits;
  readonly #feedback: RateFeedback;
  readonly #classifier: RequestClassifier;
  readonly #telemetry: Telemetry;
  readonly #vendorBaseUrls: ReadonlyMap<string, string>;
  readonly #vendorClients = new Map<string, VendorClient>();
  readonly #options: BrokerClientOptions;
  readonly #retry: ReturnType<typeof resolveRetrySettings>;
  readonly #vendorTimeoutMs: number;
  #closed = false;

  constructor(options: BrokerClientOptions) {
    this.#options = options;
    const baseUrl = brokerBaseUrl(options.brokerUrl);
    this.#clock = options.clock ?? systemClock;
    this.#telemetry = options.telemetry ?? silent;
    const vendorBaseUrls = new Map<string, string>();
    for (const [setId, url] of Object.entries(options.vendorBaseUrls ?? {})) {
      if (!vendorBaseUrlSchema.safeParse(url).success) {
        throw new ConfigurationError(`vendorBaseUrls.${setId}: must be https:// (http:// only for loopback)`);
      }
      vendorBaseUrls.set(setId, url);
    }
    this.#vendorBaseUrls = vendorBaseUrls;
    this.#retry = resolveRetrySettings({ maxAttempts: 4, budgetMs: 60_000, ...options.retry });
    this.#vendorTimeoutMs = setting('vendorTimeoutMs', options.vendorTimeoutMs, 10_000, 'positive');
    this.#api = new BrokerApi({
      baseUrl,
      signer: new FunctionUrlSigner({
        region: resolveRegion(options.region, baseUrl),
        credentials: resolveCredentials(options.credentials),
      }),
      clock: this.#clock,
      fetch: options.fetch ?? globalThis.fetch,
      timeoutMs: setting('brokerTimeoutMs', options.brokerTimeoutMs, 15_000, 'positive'),
      userAgent: options.userAgent ?? 'token-broker-client',
      random: this.#retry.random,
    });
    this.#permits = new Permits({
      api: this.#api,
      clock: this.#clock,
      telemetry: this.#telemetry,
      maxBatchSize: setting('maxBatchSize', options.maxBatchSize, 8, 'count'),
      safetyMs: setting('permitSafetyMs', options.permitSafetyMs, 500, 'nonNegative'),
      maxWaitMs: setting('maxPermitWaitMs', options.maxPermitWaitMs, 60_000, 'nonNegative'),
      random: this.#retry.random,
    });
    const marginSeconds = setting('tokenMarginSeconds', options.tokenMarginSeconds, 60, 'nonNegative');
    this.#tokens = new TokenCache({
      api: this.#api,
      clock: this.#clock,
      marginSeconds,
      spreadSeconds: setting(
        'tokenSwitchSpreadSeconds',
        options.tokenSwitchSpreadSeconds,
        marginSeconds,
        'nonNegative',
      ),
      random: this.#retry.random,
      floorSeconds: setting('validityFloorSeconds', options.validityFloorSeconds, 300, 'positive'),
      telemetry: this.#telemetry,
      onReplaced: (setId, oldTokenId) => this.#permits.releaseToken(setId, oldTokenId),
    });
    this.#feedback = new RateFeedback({ api: this.#api, telemetry: this.#telemetry });
    this.#classifier = new RequestClassifier(this.#telemetry);
  }

  /** The credential sets this caller may use, with their health. */
  async listCredentialSets(options: { signal?: AbortSignal } = {}): Promise<CredentialSetSummary[]> {
    this.#checkOpen();
    return this.#api.listCredentialSets(options.signal);
  }

  /**
   * Forces a re-login of the set and answers the new token's id and expiry (never the token): for operators
   * whose entry in the stage has `refresh: true` (`token-broker refresh`); anyone else gets 403. One login
   * however many ask at once (a token less than a minute old is the answer as it is: one login attempt a
   * minute per set); no new token is a 503 TOKEN_UNAVAILABLE with its cause.
   */
  async forceRefresh(setId: string, options: { signal?: AbortSignal } = {}): Promise<ForcedRefresh> {
    this.#checkOpen();
    const answer = await this.#api.forceRefresh(setId, options.signal);
    return {
      credentialSet: answer.credentialSet,
      environment: answer.environment,
      tokenId: answer.tokenId,
      expiresAt: answer.expiresAt,
      expiresInSeconds: answer.expiresInSeconds,
      loggedIn: answer.loggedIn,
      ...(answer.refreshedAt === undefined ? {} : { refreshedAt: answer.refreshedAt }),
      ...(answer.replacedTokenId === undefined ? {} : { replacedTokenId: answer.replacedTokenId }),
    };
  }

  /** The set's token: from memory while it has `max(minValiditySeconds, 300)` + margin left, else from the broker. */
  async getToken(setId: string, options: GetTokenOptions = {}): Promise<VendedToken> {
    this.#checkOpen();
    const { minValiditySeconds } = options;
    if (
      minValiditySeconds !== undefined &&
      !(Number.isSafeInteger(minValiditySeconds) && minValiditySeconds >= 0)
    ) {
      throw new InvalidClientRequestError('minValiditySeconds: must be a whole number of seconds, 0 or more');
    }
    return this.#tokens.get(setId, options);
  }

  /**
   * One permit for one vendor request with the token `tokenId`; send the request right away. When permits are
   * scarce, waiting `interactive` callers (the default) of this client are served before any `batch` one.
   */
  async acquirePermit(
    setId: string,
    tokenId: string,
    options: AcquirePermitOptions = {},
  ): Promise<PermitHandle> {
    this.#checkOpen();
    checkPriority(options.priority);
    return this.#permits.acquire(setId, tokenId, options);
  }

  /**
   * A vendor request with the set's token and a permit, by the vendor's rules (see vendorCall). Throws the
   * vendor's typed errors (VendorApiError …) for final answers, BrokerApiError / PermitDeadlineError when the
   * broker could not provide a token or a permit in time.
   */
  async vendorRequest<T = unknown>(
    setId: string,
    request: VendorRequestOptions,
  ): Promise<ResourceResponse<T>> {
    this.#checkOpen();
    checkPriority(request.priority);
    return vendorCall<T>(
      {
        tokens: this.#tokens,
        permits: this.#permits,
        feedback: this.#feedback,
        classifier: this.#classifier,
        vendorFor: (id, token) => this.#vendorFor(id, token),
        clock: this.#clock,
        telemetry: this.#telemetry,
        settings: this.#retry,
      },
      setId,
      request,
    );
  }

  /**
   * What the vendor said of the quota to a call this service made itself (with a token and a permit of this
   * client): a 429 holds this client's permits for the token until its Retry-After (1 s when it says none)
   * and is reported to the broker, a cooldown for every consumer of the token (as far as the broker trusts one
   * caller: docs/vend-api.md); a 2xx's X-RateLimit-* headers are reported when they show fewer requests left
   * than the ledger last said (they cap the ledger), and, of a `class`, once per vendor window when the ledger
   * has no window of the class with their limit or the class is learned (rate-feedback.ts, as vendorRequest).
   * Any other status reports nothing. Best effort: a failed report does not throw (`reported: false`, and a
   * warning through telemetry).
   */
  async reportRateLimit(
    setId: string,
    tokenId: string,
    answer: VendorAnswer,
    options: ReportRateLimitOptions = {},
  ): Promise<RateLimitReportResult> {
    this.#checkOpen();
    checkTokenId('tokenId', tokenId);
    const { status, rateLimit } = readVendorAnswer(answer, this.#clock.now());
    if (status === 429) {
      const { retryAfterSeconds, ...window } = rateLimit;
      const reported = await afterVendorRateLimit(
        { permits: this.#permits, feedback: this.#feedback },
        setId,
        tokenId,
        retryAfterSeconds ?? RETRY_AFTER_UNSAID_SECONDS,
        window,
        options.class,
      );
      return { reported };
    }
    if (status < 200 || status > 299) return { reported: false };
    const sending = this.#feedback.afterSuccess(
      setId,
      tokenId,
      rateLimit,
      this.#permits.lastKnownWindows(setId, tokenId, options.class),
      options.class,
      options.class,
      // As vendorRequest does: a learned class's answers are reported once per vendor window (a renewal).
      options.class !== undefined && this.#tokens.learned(setId, options.class),
    );
    return { reported: sending ? await sending : false };
  }

  /**
   * The vendor answered 401 TOKEN_EXPIRED or TOKEN_INVALID to a call this service made itself with the token
   * `tokenId`: the broker is told (it re-logs in when that is its current token, at most once per interval for
   * all callers) and answers the token to use now, which this client also caches from then on; the rejected
   * token's permits in hand go back. Concurrent reports of one token are one request. Throws BrokerApiError
   * when the broker refuses or cannot answer (e.g. 503 TOKEN_UNAVAILABLE while the vendor's login fails).
   */
  async reportRejection(
    setId: string,
    rejection: TokenRejection,
    options: { signal?: AbortSignal } = {},
  ): Promise<VendedToken> {
    this.#checkOpen();
    checkTokenId('rejection.tokenId', rejection?.tokenId);
    if (rejection.errorCode !== 'TOKEN_EXPIRED' && rejection.errorCode !== 'TOKEN_INVALID') {
      throw new InvalidClientRequestError("rejection.errorCode: must be 'TOKEN_EXPIRED' or 'TOKEN_INVALID'");
    }
    return this.#tokens.afterRejection(
      setId,
      { tokenId: rejection.tokenId },
      rejection.errorCode,
      rejection.requestId,
      options.signal,
    );
  }

  /** Gives back every unused permit and waits for the reports still on their way. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#permits.close();
    await this.#feedback.settle();
  }

  /** The token answer's `vendorBaseUrl` when the broker sends one, else `vendorBaseUrls[setId]`. */
  #vendorFor(setId: string, token: VendedToken): VendorClient {
    const baseUrl = token.vendorBaseUrl ?? this.#vendorBaseUrls.get(setId);
    if (baseUrl === undefined) {
      throw new ConfigurationError(
        `vendorBaseUrls.${setId}: not configured, and the broker did not name the vendor URL`,
      );
    }
    let client = this.#vendorClients.get(baseUrl);
    if (!client) {
      client = new VendorClient({
        baseUrl,
        clock: this.#clock,
        timeoutMs: this.#vendorTimeoutMs,
        ...(this.#options.fetch ? { fetch: this.#options.fetch } : {}),
        telemetry: this.#telemetry,
        userAgent: this.#options.userAgent ?? 'token-broker-client',
      });
      this.#vendorClients.set(baseUrl, client);
    }
    return client;
  }

  #checkOpen(): void {
    if (this.#closed) throw new ClientClosedError('the broker client was closed');
  }
}

/**
 * BrokerClient's public methods as a type: what a service's code can take as its dependency, so that a unit test
 * can pass `FakeBrokerClient` (`@token-broker/client/testing`) where production passes a BrokerClient (the class
 * itself has private fields, which TypeScript compares by declaration).
 */
export type BrokerClientApi = Pick<
  BrokerClient,
  | 'listCredentialSets'
  | 'getToken'
  | 'acquirePermit'
  | 'vendorRequest'
  | 'reportRateLimit'
  | 'reportRejection'
  | 'close'
>;
