import { type Clock, systemClock } from '../clock.js';
import { ConfigurationError } from '../errors.js';
import type { Telemetry } from '../observability.js';
import {
  InvalidVendorRequestError,
  UnexpectedVendorResponseError,
  VendorCallAbortedError,
  VendorError,
  VendorTimeoutError,
  VendorUnreachableError,
} from './errors.js';
import { toLoginResult } from './login-result.js';
import {
  headerRequestId,
  parseJson,
  parseRateLimitHeaders,
  type RawVendorResponse,
  toVendorError,
} from './parse-response.js';
import { redactSecrets } from './redact.js';
import { assertVendorPath } from './resource-path.js';
import { type RetryEvent, type RetrySettings, resolveRetrySettings, withRetry } from './retry.js';
import { DEFAULT_ATTEMPT_TIMEOUT_MS } from './retry-settings.js';
import { tokenId } from './token-id.js';
import type {
  HttpMethod,
  LoginResult,
  ResourceRequest,
  ResourceResponse,
  VendorCredentials,
} from './types.js';
import { parseVendorBaseUrl } from './vendor-url.js';

export const LOGIN_PATH = '/restful/login/';
const METHODS: readonly HttpMethod[] = ['GET', 'PUT', 'POST', 'DELETE'];
/** Visible ASCII only: a CR/LF would split headers, and fetch would quote the bad value in its error. */
const HEADER_SAFE = /^[\x21-\x7e]+$/;

export interface VendorClientOptions {
  /** https://…, or http:// to a loopback address (the sandbox). Paths are appended to it. */
  baseUrl: string;
  /** Measures the retry budget and performs retry waits; default the system clock. */
  clock?: Clock;
  /** Per attempt, real time, covering the answer's body too. Default DEFAULT_ATTEMPT_TIMEOUT_MS (10 s). */
  timeoutMs?: number;
  retry?: Partial<RetrySettings>;
  fetch?: typeof fetch;
  userAgent?: string;
  /** Where retries are reported (never with a password or a token). */
  telemetry?: Telemetry;
}

export interface LoginOptions {
  signal?: AbortSignal;
  retry?: false | Partial<RetrySettings>;
}

/** What the refresher needs of a vendor client. */
export interface VendorLogin {
  login(credentials: VendorCredentials, options?: { signal?: AbortSignal }): Promise<LoginResult>;
}

/** The vendor's API over HTTPS: login and resource calls, typed errors, the vendor's retry rules. */
export class VendorClient implements VendorLogin {
  readonly #baseUrl: string;
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  readonly #retry: RetrySettings;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;
  readonly #telemetry: Telemetry | undefined;

  constructor(options: VendorClientOptions) {
    this.#baseUrl = parseVendorBaseUrl(options.baseUrl);
    this.#clock = options.clock ?? systemClock;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
    if (!Number.isFinite(this.#timeoutMs) || this.#timeoutMs <= 0) {
      throw new ConfigurationError('vendor client timeoutMs must be a positive number');
    }
    this.#retry = resolveRetrySettings(options.retry);
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#userAgent = options.userAgent ?? 'token-broker';
    if (!HEADER_SAFE.test(this.#userAgent.replaceAll(' ', '-'))) {
      throw new ConfigurationError('vendor client userAgent must be printable ASCII');
    }
    this.#telemetry = options.telemetry;
  }

  get baseUrl(): string {
    return this.#baseUrl;
  }

  /**
   * POST /restful/login/ (§4). Retries 5xx, 429, timeouts and network failures; INVALID_CREDENTIALS
   * and every other 4xx are final. A token without a usable, future `exp` is a VendorTokenUnusableError.
   */
  async login(credentials: VendorCredentials, options: LoginOptions = {}): Promise<LoginResult> {
    const { username, password } = (credentials ?? {}) as Partial<VendorCredentials>;
    if (typeof username !== 'string' || username === '' || typeof password !== 'string' || password === '') {
      throw new InvalidVendorRequestError('login needs a non-empty username and password (strings)');
    }
    const body = JSON.stringify({ username, password });
    return this.#withRetry({ method: 'POST', path: LOGIN_PATH }, options, async () => {
      const sentAt = this.#clock.now();
      const response = await this.#exchange('POST', LOGIN_PATH, undefined, body, options.signal);
      if (!isSuccess(response.status)) throw this.#errorOf(response, [password]);
      const result = toLoginResult(response, this.#clock.now());
      result.requestSentAt = sentAt;
      return result;
    });
  }

  /**
   * A resource call (§4), or a call of a configured request class (`ofClass`), with the bearer token. Non-2xx
   * answers become the typed vendor errors.
   */
  async request<T = unknown>(req: ResourceRequest): Promise<ResourceResponse<T>> {
    const { method, path, token } = req;
    if (!METHODS.includes(method)) {
      throw new InvalidVendorRequestError(`method must be one of ${METHODS.join(', ')}`);
    }
    assertVendorPath(path, req.ofClass === true);
    if (typeof token !== 'string' || !HEADER_SAFE.test(token)) {
      throw new InvalidVendorRequestError('token must be a non-empty string of printable ASCII characters');
    }
    const body = serialiseBody(method, req.body);
    const context = { method, path, tokenId: tokenId(token) };
    return this.#withRetry(context, req, async () => {
      const response = await this.#exchange(method, path, token, body, req.signal);
      if (!isSuccess(response.status)) throw this.#errorOf(response, [token]);
      const json = parseJson(response.text);
      if (!json.ok) throw new UnexpectedVendorResponseError(response.status, 'the body is not JSON');
      const result: ResourceResponse<T> = {
        status: response.status,
        body: json.value as T,
        rateLimit: parseRateLimitHeaders(response.headers, this.#clock.now()),
      };
      const requestId = headerRequestId(response.headers);
      if (requestId !== undefined) result.requestId = requestId;
      return result;
    });
  }

  #withRetry<T>(
    context: { method: HttpMethod; path: string; tokenId?: string },
    options: { signal?: AbortSignal; retry?: false | Partial<RetrySettings> },
    operation: () => Promise<T>,
  ): Promise<T> {
    const settings =
      options.retry === false ? { ...this.#retry, maxAttempts: 1 } : { ...this.#retry, ...options.retry };
    return withRetry(operation, {
      clock: this.#clock,
      settings,
      signal: options.signal,
      onRetry: (event) => this.#reportRetry(context, event),
    });
  }

  #reportRetry(context: { method: HttpMethod; path: string; tokenId?: string }, event: RetryEvent): void {
    const { error } = event;
    this.#telemetry?.warn('vendor call failed; retrying', {
      ...context,
      attempt: event.attempt,
      delayMs: event.delayMs,
      elapsedMs: event.elapsedMs,
      errorCode: error instanceof VendorError ? error.code : 'UNKNOWN',
      status: error instanceof VendorError ? error.status : undefined,
      requestId: (error as { requestId?: unknown }).requestId,
    });
  }

  #errorOf(response: RawVendorResponse, secrets: string[]): VendorError {
    return toVendorError({ ...response, text: redactSecrets(response.text, secrets) }, this.#clock.now());
  }

  /** One HTTP exchange, body included, under the per-attempt timeout and the caller's signal. */
  async #exchange(
    method: HttpMethod,
    path: string,
    token: string | undefined,
    body: string | undefined,
    callerSignal: AbortSignal | undefined,
  ): Promise<RawVendorResponse> {
    if (callerSignal?.aborted) throw callerAborted(callerSignal);
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      Accept: 'application/json',
      'User-Agent': this.#userAgent,
    };
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.#timeoutMs);
    const signal = callerSignal ? AbortSignal.any([callerSignal, timeout.signal]) : timeout.signal;
    try {
      // redirect 'manual': a redirect must not carry the credentials or the token to another place.
      const response = await this.#fetch(`${this.#baseUrl}${path}`, {
        method,
        headers,
        body,
        signal,
        redirect: 'manual',
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text };
    } catch (error) {
      if (callerSignal?.aborted) throw callerAborted(callerSignal);
      if (timeout.signal.aborted) {
        throw new VendorTimeoutError(
          `vendor did not answer ${method} ${path} within ${this.#timeoutMs} ms`,
          undefined,
          { cause: error },
        );
      }
      throw new VendorUnreachableError(
        `vendor unreachable: ${method} ${path} (${networkReason(error)})`,
        undefined,
        { cause: error, notSent: failedBeforeSending(error) },
      );
    } finally {
      clearTimeout(timer);
    }
  }
}

const isSuccess = (status: number): boolean => status >= 200 && status < 300;

function callerAborted(signal: AbortSignal): VendorCallAbortedError {
  return new VendorCallAbortedError('vendor call aborted by the caller', undefined, { cause: signal.reason });
}

/** The system error code (ECONNREFUSED, ENOTFOUND …) undici keeps in `cause`, else the cause's own words. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string' && cause.message !== '') return cause.message.slice(0, 100);
  return error instanceof Error ? error.name : 'unknown error';
}

/** Failures of name resolution and of connecting: no byte of the request can have been written. */
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * Whether fetch failed before writing the request: undici keeps the system error in `cause` (with the syscall
 * `connect` or `getaddrinfo`), or an AggregateError of one per address tried. A code alone is not enough
 * (EHOSTUNREACH can also end a connection in use), so a system error must name its syscall. Anything else
 * (ECONNRESET on read, "other side closed" on a reused connection) may come after the request was sent.
 */
function failedBeforeSending(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  const connectFailure = (e: unknown): boolean => {
    const { code, syscall } = (e ?? {}) as { code?: unknown; syscall?: unknown };
    if (code === 'UND_ERR_CONNECT_TIMEOUT') return true;
    return (
      typeof code === 'string' &&
      CONNECT_CODES.has(code) &&
      (syscall === 'connect' || syscall === 'getaddrinfo')
    );
  };
  if (cause instanceof AggregateError && cause.errors.length > 0) return cause.errors.every(connectFailure);
  return connectFailure(cause);
}

function serialiseBody(method: HttpMethod, body: unknown): string | undefined {
  if (body === undefined) return undefined;
  if (method === 'GET') throw new InvalidVendorRequestError('a GET request cannot have a body');
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch {
    text = undefined;
  }
  if (text === undefined)
    throw new InvalidVendorRequestError('the request body cannot be serialised as JSON');
  return text;
}
