/**
 * @token-broker/client/testing: FakeBrokerClient, a stand-in for BrokerClient in a service's unit tests. No broker,
 * no vendor, no network, no timers: the test scripts tokens, the broker's refusals (403, 404, 503, permits denied)
 * and the vendor's answers (a function), and reads back every call. It throws the package's own error classes
 * (imported from the package entry, so `instanceof` works in the service's code), as BrokerClient does once its
 * retries are over: a scripted refusal is the final answer, never retried here.
 */
import { tokenId as tokenIdOf } from '../shared/vendor-client/token-id.js';
import {
  type AcquirePermitOptions,
  BrokerApiError,
  type BrokerClientApi,
  ClientClosedError,
  type CredentialSetSummary,
  type GetTokenOptions,
  type HttpMethod,
  PermitDeadlineError,
  PermitHandle,
  type RateLimitHeaders,
  type RateLimitReportResult,
  type ResourceResponse,
  type TokenRejection,
  type VendedToken,
  type VendorAnswer,
  VendorApiError,
  VendorRateLimitError,
  type VendorRequestOptions,
} from './index.js';

/** A vendor request as vendorRequest would send it (its `path` function already applied to the token). */
export interface FakeVendorRequest {
  setId: string;
  method: HttpMethod;
  path: string;
  body: unknown;
  class: string | undefined;
  token: VendedToken;
}

/** The vendor's answer: 2xx is returned, 429 throws VendorRateLimitError, any other status VendorApiError. */
export interface FakeVendorAnswer {
  status: number;
  /** For an error, the vendor's shape: `{ errorCode, message }`. */
  body?: unknown;
  /** X-RateLimit-*, Retry-After, X-Request-Id, as the vendor sends them. */
  headers?: Record<string, string>;
}

export type FakeVendor = (request: FakeVendorRequest) => FakeVendorAnswer | Promise<FakeVendorAnswer>;

export interface FakeBrokerClientOptions {
  /** The credential sets that exist (default `['uat-advisor']`): any other is a 404 RESOURCE_NOT_FOUND. */
  sets?: readonly string[];
  /** Answers vendorRequest (default: 200 with the body `{}`). */
  vendor?: FakeVendor;
  /** Epoch ms (default Date.now): the tokens' and permits' times. */
  now?: () => number;
}

/** One call the service made, in order. */
export interface FakeCall {
  method: keyof BrokerClientApi;
  setId?: string;
  /** vendorRequest's request (path resolved); acquirePermit's and reportRateLimit's class. */
  request?: { method: HttpMethod; path: string; body?: unknown };
  class?: string;
}

type Refusal = { status: 403 | 404 | 503; times: number; retryAfterSeconds: number | undefined };

/** The broker's answers, as it words them (the set named; a 503 with its cause, here a re-login in progress). */
const BROKER_ANSWERS = {
  403: {
    code: 'INSUFFICIENT_PERMISSIONS',
    message: (set: string) => `this caller may not use credential set "${set}"`,
  },
  404: { code: 'RESOURCE_NOT_FOUND', message: (set: string) => `no credential set "${set}"` },
  503: {
    code: 'TOKEN_UNAVAILABLE',
    message: (set: string) =>
      `credential set "${set}" has no usable token: a re-login is in progress (REFRESH_IN_PROGRESS)`,
  },
} as const;

const TOKEN_LIFETIME_SECONDS = 4 * 3600;
const PERMIT_VALIDITY_MS = 2000;

export class FakeBrokerClient implements BrokerClientApi {
  /** Every call, in order (also those that threw). */
  readonly calls: FakeCall[] = [];
  /** Permits handed out, and how their holders settled them. */
  readonly permits = { granted: 0, used: 0, givenBack: 0 };
  readonly #sets: readonly string[];
  readonly #vendor: FakeVendor;
  readonly #now: () => number;
  readonly #tokens = new Map<string, VendedToken>();
  readonly #refusals = new Map<string, Refusal[]>();
  readonly #denials = new Map<string, { retryAfterSeconds: number; times: number }>();
  #serial = 0;
  #closed = false;

  constructor(options: FakeBrokerClientOptions = {}) {
    this.#sets = options.sets ?? ['uat-advisor'];
    this.#vendor = options.vendor ?? (() => ({ status: 200, body: {} }));
    this.#now = options.now ?? Date.now;
  }

  /** True after close(). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The next `times` (default 1) calls naming `setId` throw the BrokerApiError the broker's answer gives: 403
   * INSUFFICIENT_PERMISSIONS, 404 RESOURCE_NOT_FOUND, 503 TOKEN_UNAVAILABLE (with `retryAfterSeconds`).
   */
  refuse(
    setId: string,
    status: 403 | 404 | 503,
    options: { times?: number; retryAfterSeconds?: number } = {},
  ): this {
    const queue = this.#refusals.get(setId) ?? [];
    queue.push({ status, times: options.times ?? 1, retryAfterSeconds: options.retryAfterSeconds });
    this.#refusals.set(setId, queue);
    return this;
  }

  /**
   * The next `times` (default 1) permit asks of `setId` (acquirePermit, vendorRequest) throw PermitDeadlineError:
   * the broker's 429s (no room in the quota, a cooldown) outlasted the caller's wait.
   */
  denyPermits(setId: string, options: { times?: number; retryAfterSeconds?: number } = {}): this {
    this.#denials.set(setId, {
      times: options.times ?? 1,
      retryAfterSeconds: options.retryAfterSeconds ?? 1,
    });
    return this;
  }

  /** The set's token from now on: a new one, as after the broker's re-login. */
  rotateToken(setId: string): VendedToken {
    const now = this.#now();
    const serial = ++this.#serial;
    const accessToken = `fake-access-token-${setId}-${serial}`;
    const expiresAt = Math.floor(now / 1000) + TOKEN_LIFETIME_SECONDS;
    const fields: Omit<VendedToken, 'accessToken'> = {
      credentialSet: setId,
      environment: setId.split('-')[0] ?? setId,
      tokenId: tokenIdOf(accessToken),
      expiresAt,
      expiresInSeconds: TOKEN_LIFETIME_SECONDS,
      tenant: `${setId}-tenant`,
      companyKey: `${setId}-company`,
      executionPlatformKey: `${setId}-platform`,
      userKey: `${setId}-user`,
      quota: null,
      vendorBaseUrl: 'https://vendor.invalid',
      classes: [],
      receivedAt: now,
      expiresAtMs: expiresAt * 1000,
    };
    // Non-enumerable, as BrokerClient's: never in JSON.stringify, a spread or console.log.
    const token = Object.freeze(
      Object.defineProperty({ ...fields }, 'accessToken', { value: accessToken, enumerable: false }),
    ) as VendedToken;
    this.#tokens.set(setId, token);
    return token;
  }

  async listCredentialSets(): Promise<CredentialSetSummary[]> {
    this.#record({ method: 'listCredentialSets' });
    return this.#sets.map((id) => ({
      id,
      environment: id.split('-')[0] ?? id,
      companyRole: id.split('-')[1] ?? 'advisor',
      health: { state: 'HEALTHY', expiresAt: this.#tokens.get(id)?.expiresAt ?? null, lastError: null },
    }));
  }

  async getToken(setId: string, _options?: GetTokenOptions): Promise<VendedToken> {
    this.#record({ method: 'getToken', setId });
    return this.#token(setId);
  }

  async acquirePermit(
    setId: string,
    tokenId: string,
    options: AcquirePermitOptions = {},
  ): Promise<PermitHandle> {
    this.#record({ method: 'acquirePermit', setId, ...(options.class ? { class: options.class } : {}) });
    this.#token(setId);
    return this.#permit(setId, tokenId, options.class);
  }

  async vendorRequest<T = unknown>(
    setId: string,
    request: VendorRequestOptions,
  ): Promise<ResourceResponse<T>> {
    const call: FakeCall = {
      method: 'vendorRequest',
      setId,
      ...(request.class ? { class: request.class } : {}),
    };
    this.#record(call);
    let token = this.#token(setId);
    for (let attempt = 1; ; attempt++) {
      const path = typeof request.path === 'function' ? request.path(token) : request.path;
      call.request = {
        method: request.method,
        path,
        ...(request.body !== undefined ? { body: request.body } : {}),
      };
      this.#permit(setId, token.tokenId, request.class).markUsed();
      const answer = await this.#vendor({
        setId,
        method: request.method,
        path,
        body: request.body,
        class: request.class,
        token,
      });
      // As BrokerClient: a token the vendor rejects is reported and the call made once more with the new one.
      if (answer.status === 401 && attempt === 1 && isRejection(answer.body)) {
        token = this.rotateToken(setId);
        continue;
      }
      return vendorResult<T>(answer);
    }
  }

  async reportRateLimit(
    setId: string,
    _tokenId: string,
    answer: VendorAnswer,
    options: { class?: string } = {},
  ): Promise<RateLimitReportResult> {
    this.#record({ method: 'reportRateLimit', setId, ...(options.class ? { class: options.class } : {}) });
    this.#token(setId);
    return { reported: answer.status === 429 };
  }

  async reportRejection(setId: string, _rejection: TokenRejection): Promise<VendedToken> {
    this.#record({ method: 'reportRejection', setId });
    this.#token(setId);
    return this.rotateToken(setId);
  }

  async close(): Promise<void> {
    this.calls.push({ method: 'close' });
    this.#closed = true;
  }

  #record(call: FakeCall): void {
    this.calls.push(call);
    if (this.#closed) throw new ClientClosedError('the broker client was closed');
  }

  /** The set's token, or the broker's scripted (or unknown set's) refusal. */
  #token(setId: string): VendedToken {
    if (!this.#sets.includes(setId)) throw brokerError(setId, 404, undefined);
    const refusal = this.#refusals.get(setId)?.[0];
    if (refusal) {
      if (--refusal.times <= 0) this.#refusals.get(setId)?.shift();
      throw brokerError(setId, refusal.status, refusal.retryAfterSeconds);
    }
    return this.#tokens.get(setId) ?? this.rotateToken(setId);
  }

  #permit(setId: string, tokenId: string, cls: string | undefined): PermitHandle {
    const denial = this.#denials.get(setId);
    if (denial && denial.times > 0) {
      denial.times--;
      throw new PermitDeadlineError('no permit before the deadline (scripted)', denial.retryAfterSeconds);
    }
    const now = this.#now();
    this.permits.granted++;
    return new PermitHandle(
      {
        credentialSet: setId,
        tokenId,
        ...(cls ? { class: cls } : {}),
        grantedAt: now,
        validUntil: now + PERMIT_VALIDITY_MS,
      },
      (how) => {
        this.permits[how]++;
        return how === 'givenBack';
      },
    );
  }
}

function brokerError(
  setId: string,
  status: 403 | 404 | 503,
  retryAfterSeconds: number | undefined,
): BrokerApiError {
  const { code, message } = BROKER_ANSWERS[status];
  const details =
    status === 503
      ? { credentialSet: setId, cause: { code: 'REFRESH_IN_PROGRESS', reason: 'a re-login is in progress' } }
      : { credentialSet: setId };
  return new BrokerApiError({
    status,
    code,
    message: message(setId),
    requestId: 'fake-broker-request',
    retryAfterSeconds,
    details,
  });
}

function isRejection(body: unknown): boolean {
  const code = (body as { errorCode?: unknown } | undefined)?.errorCode;
  return code === 'TOKEN_EXPIRED' || code === 'TOKEN_INVALID';
}

function headerNumber(headers: Record<string, string>, name: string): number | undefined {
  const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name);
  const value = entry ? Number(entry[1]) : Number.NaN;
  return Number.isFinite(value) ? value : undefined;
}

function vendorResult<T>(answer: FakeVendorAnswer): ResourceResponse<T> {
  const headers = answer.headers ?? {};
  const rateLimit: RateLimitHeaders = {};
  for (const [field, name] of [
    ['limit', 'x-ratelimit-limit'],
    ['remaining', 'x-ratelimit-remaining'],
    ['reset', 'x-ratelimit-reset'],
    ['retryAfterSeconds', 'retry-after'],
  ] as const) {
    const value = headerNumber(headers, name);
    if (value !== undefined) rateLimit[field] = value;
  }
  const requestId = Object.entries(headers).find(([key]) => key.toLowerCase() === 'x-request-id')?.[1];
  if (answer.status >= 200 && answer.status < 300) {
    return { status: answer.status, body: answer.body as T, rateLimit, ...(requestId ? { requestId } : {}) };
  }
  const body = (answer.body ?? {}) as { errorCode?: string; message?: string };
  const vendorMessage = body.message ?? '';
  const ids = requestId ? { requestId } : {};
  if (answer.status === 429) {
    throw new VendorRateLimitError({
      vendorMessage,
      rateLimit,
      ...ids,
      ...(rateLimit.retryAfterSeconds !== undefined
        ? { retryAfterSeconds: rateLimit.retryAfterSeconds }
        : {}),
      ...(rateLimit.limit !== undefined ? { limit: rateLimit.limit } : {}),
      ...(rateLimit.reset !== undefined ? { reset: rateLimit.reset } : {}),
    });
  }
  throw new VendorApiError({
    status: answer.status,
    code: body.errorCode ?? 'UNKNOWN',
    vendorMessage,
    ...ids,
  });
}
