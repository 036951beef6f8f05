import type * as z from 'zod';
import type { Clock } from '../shared/clock.js';
import { VendorCallAbortedError } from '../shared/vendor-client/errors.js';
import { parseJson } from '../shared/vendor-client/parse-response.js';
import { type RetryAdvice, type RetrySettings, withRetry } from '../shared/vendor-client/retry.js';
import {
  brokerError,
  listAnswer,
  type PermitGrant,
  permitAnswer,
  type RefreshAnswer,
  refreshAnswer,
  returnAnswer,
  shapeProblem,
  tokenAnswer,
  toSummaries,
  toVendedToken,
  unexpected,
} from './broker-responses.js';
import { BrokerApiError, BrokerUnreachableError, RequestAbortedError } from './errors.js';
import type { FunctionUrlSigner } from './sigv4.js';
import type { CredentialSetSummary, VendedToken } from './types.js';

/** Broker calls are retried on 5xx (a re-login in progress answers 503 with Retry-After) and network failures. */
const BROKER_RETRY: Partial<RetrySettings> = {
  maxAttempts: 3,
  baseDelayMs: 200,
  maxDelayMs: 2000,
  budgetMs: 30_000,
};

function brokerRetryAdvice(error: unknown): RetryAdvice {
  if (error instanceof BrokerUnreachableError) return { retryable: true };
  if (error instanceof BrokerApiError && [500, 502, 503, 504].includes(error.status)) {
    return error.retryAfterSeconds === undefined
      ? { retryable: true }
      : { retryable: true, retryAfterMs: error.retryAfterSeconds * 1000 };
  }
  return { retryable: false };
}

export interface BrokerApiOptions {
  baseUrl: string;
  signer: FunctionUrlSigner;
  clock: Clock;
  fetch: typeof fetch;
  timeoutMs: number;
  userAgent: string;
  random?: () => number;
}

interface CallOptions<T> {
  method: 'GET' | 'POST';
  path: string;
  body?: Record<string, unknown>;
  schema?: z.ZodType<T>;
  signal?: AbortSignal | undefined;
  /** Off for calls that must not be repeated (a give-back counted twice could exceed the quota). */
  retry: boolean;
}

const setPath = (setId: string, rest: string): string =>
  `/v1/credential-sets/${encodeURIComponent(setId)}${rest}`;

/**
 * The vend API over HTTP, every request signed with SigV4 for the Function URL (service `lambda`) on the
 * client's clock. Answers are checked against their shapes; errors become BrokerApiError. No token is ever
 * put into an error or a log.
 */
export class BrokerApi {
  readonly #options: BrokerApiOptions;

  constructor(options: BrokerApiOptions) {
    this.#options = options;
  }

  async listCredentialSets(signal?: AbortSignal): Promise<CredentialSetSummary[]> {
    const answer = await this.#call({
      method: 'GET',
      path: '/v1/credential-sets',
      schema: listAnswer,
      signal,
      retry: true,
    });
    return toSummaries(answer);
  }

  async getToken(
    setId: string,
    minValiditySeconds: number | undefined,
    signal?: AbortSignal,
  ): Promise<VendedToken> {
    const query = minValiditySeconds === undefined ? '' : `?minValiditySeconds=${minValiditySeconds}`;
    const answer = await this.#call({
      method: 'GET',
      path: setPath(setId, `/token${query}`),
      schema: tokenAnswer,
      signal,
      retry: true,
    });
    return toVendedToken(answer, this.#options.clock.now());
  }

  /**
   * An operator's forced re-login. Not retried: a second request after a lost answer would replace the token
   * the first one made.
   */
  forceRefresh(setId: string, signal?: AbortSignal): Promise<RefreshAnswer> {
    return this.#call({
      method: 'POST',
      path: setPath(setId, '/refresh'),
      schema: refreshAnswer,
      signal,
      retry: false,
    });
  }

  /** A 429 (no room) is thrown as BrokerApiError RATE_LIMIT_EXCEEDED, not retried here. */
  acquirePermits(
    setId: string,
    request: { tokenId: string; count: number; class?: string | undefined },
    signal?: AbortSignal,
  ): Promise<PermitGrant> {
    const body = {
      tokenId: request.tokenId,
      count: request.count,
      ...(request.class ? { class: request.class } : {}),
    };
    return this.#call({
      method: 'POST',
      path: setPath(setId, '/permits'),
      body,
      schema: permitAnswer,
      signal,
      retry: true,
    });
  }

  async returnPermits(
    setId: string,
    request: { tokenId: string; count: number; receipt: string },
  ): Promise<number> {
    const body = { tokenId: request.tokenId, count: request.count, receipt: request.receipt };
    try {
      const answer = await this.#call({
        method: 'POST',
        path: setPath(setId, '/permits/returns'),
        body,
        schema: returnAnswer,
        // Safe to re-send: the receipt is spent once, whatever arrives twice.
        retry: true,
      });
      return answer.returned;
    } catch (error) {
      // A re-sent give-back whose first answer was lost finds its receipt spent: it is back already.
      if (error instanceof BrokerApiError && error.status === 409 && error.code === 'RECEIPT_SPENT')
        return request.count;
      throw error;
    }
  }

  async reportRejection(
    setId: string,
    report: { tokenId: string; errorCode: 'TOKEN_EXPIRED' | 'TOKEN_INVALID'; requestId?: string | undefined },
    signal?: AbortSignal,
  ): Promise<VendedToken & { reloggedIn?: boolean }> {
    // The broker takes the vendor's requestId only in its plain form; anything else is left out, not refused.
    const requestId =
      report.requestId && /^[\w.:/-]{1,128}$/.test(report.requestId) ? report.requestId : undefined;
    const body = {
      tokenId: report.tokenId,
      errorCode: report.errorCode,
      ...(requestId ? { requestId } : {}),
    };
    const answer = await this.#call({
      method: 'POST',
      path: setPath(setId, '/token/rejections'),
      body,
      schema: tokenAnswer,
      signal,
      retry: true,
    });
    return toVendedToken(answer, this.#options.clock.now());
  }

  async reportRateLimit(
    setId: string,
    report: {
      tokenId: string;
      /** Brokers with request classes by path take it; older ones refuse the field. */
      class?: string;
      retryAfterSeconds?: number;
      limit?: number;
      remaining?: number;
      reset?: number;
    },
  ): Promise<void> {
    await this.#call({
      method: 'POST',
      path: setPath(setId, '/rate-limit-reports'),
      body: { ...report },
      retry: true,
    });
  }

  async #call<T>(call: CallOptions<T>): Promise<T> {
    try {
      if (!call.retry) return await this.#once(call);
      return await withRetry(() => this.#once(call), {
        clock: this.#options.clock,
        settings: { ...BROKER_RETRY, ...(this.#options.random ? { random: this.#options.random } : {}) },
        signal: call.signal,
        advise: brokerRetryAdvice,
      });
    } catch (error) {
      // withRetry names an abort during its wait after the vendor; here it is the broker's call.
      if (error instanceof VendorCallAbortedError)
        throw new RequestAbortedError('broker call aborted by the caller', { cause: error.cause });
      throw error;
    }
  }

  async #once<T>(call: CallOptions<T>): Promise<T> {
    const { clock, signer, timeoutMs } = this.#options;
    if (call.signal?.aborted) throw new RequestAbortedError('broker call aborted by the caller');
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.#options.userAgent,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const signed = await signer.sign(
      {
        url: `${this.#options.baseUrl}${call.path}`,
        method: call.method,
        headers,
        ...(body === undefined ? {} : { body }),
      },
      new Date(clock.now()),
    );
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout.signal]) : timeout.signal;
    let status: number;
    let responseHeaders: Headers;
    let text: string;
    try {
      const response = await this.#options.fetch(signed.url, {
        method: signed.method,
        headers: signed.headers,
        body: signed.body,
        signal,
        redirect: 'manual',
      });
      status = response.status;
      responseHeaders = response.headers;
      text = await response.text();
    } catch (error) {
      if (call.signal?.aborted)
        throw new RequestAbortedError('broker call aborted by the caller', { cause: call.signal.reason });
      const what = timeout.signal.aborted ? `no answer within ${timeoutMs} ms` : 'connection failed';
      throw new BrokerUnreachableError(
        `broker unreachable: ${call.method} ${call.path.split('?')[0]} (${what})`,
        { cause: error },
      );
    } finally {
      clearTimeout(timer);
    }
    const json = parseJson(text);
    if (status < 200 || status >= 300)
      throw brokerError(status, responseHeaders, json.ok ? json.value : undefined, clock.now());
    if (!call.schema) return undefined as T;
    if (!json.ok) throw unexpected(status, 'the answer is not JSON');
    const parsed = call.schema.safeParse(json.value);
    if (!parsed.success) throw unexpected(status, shapeProblem(parsed.error));
    return parsed.data;
  }
}
