import type { Clock } from '../shared/clock.js';
import type { Telemetry } from '../shared/telemetry.js';
import type { VendorClient } from '../shared/vendor-client/client.js';
import {
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorCallAbortedError,
  VendorError,
  VendorRateLimitError,
  VendorUnreachableError,
} from '../shared/vendor-client/errors.js';
import { assertVendorPath } from '../shared/vendor-client/resource-path.js';
import { fullJitterDelayMs, type RetrySettings, vendorRetryAdvice } from '../shared/vendor-client/retry.js';
import type { ResourceResponse } from '../shared/vendor-client/types.js';
import { BrokerApiError, RequestAbortedError } from './errors.js';
import type { PermitHandle } from './permit-handle.js';
import type { Permits } from './permits.js';
import { afterVendorRateLimit, type RateFeedback, type RateWindow } from './rate-feedback.js';
import type { RequestClassifier } from './request-classifier.js';
import type { RejectionCode, TokenCache } from './token-cache.js';
import type { VendedToken, VendorRequestOptions } from './types.js';

export interface VendorCallDeps {
  tokens: TokenCache;
  permits: Permits;
  feedback: RateFeedback;
  classifier: RequestClassifier;
  vendorFor(setId: string, token: VendedToken): VendorClient;
  clock: Clock;
  telemetry: Telemetry;
  settings: RetrySettings;
}

const REJECTIONS: readonly string[] = ['TOKEN_EXPIRED', 'TOKEN_INVALID'] as const;

const isRejection = (error: unknown): error is VendorApiError & { code: RejectionCode } =>
  error instanceof VendorApiError && error.status === 401 && REJECTIONS.includes(error.code);

/** A 429 of either shape; an unknown-shaped one still means "too many" and may still have a Retry-After. */
function rateLimited(
  error: unknown,
): { retryAfterSeconds: number | undefined; window: RateWindow } | undefined {
  if (error instanceof VendorRateLimitError) {
    return {
      retryAfterSeconds: error.retryAfterSeconds,
      window: {
        limit: error.limit ?? error.rateLimit.limit,
        remaining: error.rateLimit.remaining,
        reset: error.reset ?? error.rateLimit.reset,
      },
    };
  }
  if (error instanceof UnexpectedVendorResponseError && error.status === 429) {
    return { retryAfterSeconds: error.retryAfterSeconds, window: {} };
  }
  return undefined;
}

/** Methods that HTTP defines as idempotent: sending one twice has the effect of sending it once. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/**
 * Whether the vendor cannot have acted on the failed attempt, so that even a POST may be sent again: it refused
 * it (429), or the connection failed before the request was written (DNS, connection refused). A timeout, a
 * reset after connecting, a 500, 502 or 504 may come after the vendor carried the request out.
 *
 * 503: re-sent when the answer is in the vendor's own error shape. The vendor documents 503 as "temporary
 * outage; retry with exponential backoff": its application answered, and said it is not taking requests (HTTP's
 * meaning of 503 too). A 503 of another shape (a load balancer's or proxy's page) is not trusted so far: some
 * proxies answer 503 when the upstream connection breaks after they forwarded the request (Envoy's "upstream
 * connect error or disconnect/reset before headers"), so it counts like a 502.
 */
function vendorDidNotAct(error: unknown): boolean {
  if (rateLimited(error)) return true;
  if (error instanceof VendorUnreachableError) return error.notSent;
  return error instanceof VendorApiError && error.status === 503;
}

/**
 * Most extra wait after a 429's Retry-After, drawn per wait: processes told the same Retry-After come back
 * spread over this span instead of in the same instant. Retry-After is whole seconds, so one more second
 * keeps nobody much longer than the vendor asked. Never taken past the retry budget.
 */
export const RATE_LIMIT_JITTER_MS = 1000;

/** How many dead tokens one vendor request replaces before it gives up. */
const MAX_DEAD_TOKENS = 3;

/** The broker no longer knows the token as live (expired, or two rotations old): take a fresh one. */
const isDeadToken = (error: unknown): boolean =>
  error instanceof BrokerApiError && error.status === 400 && error.details?.field === 'tokenId';

function aborted(signal: AbortSignal | undefined, cause?: unknown): RequestAbortedError {
  return new RequestAbortedError('vendor request aborted by the caller', { cause: cause ?? signal?.reason });
}

/**
 * One vendor request done the way the vendor asks, for every consumer of the token together: a cached token,
 * a permit from the ledger, `Authorization: Bearer`; on 429 report it (a cooldown for every consumer) and wait
 * Retry-After plus a small jitter; on 500/502/503/504, network failures and timeouts back off with full jitter,
 * each retry with a new permit; on 401 TOKEN_EXPIRED / TOKEN_INVALID report the rejection, take the broker's
 * answer and retry once; every other 4xx is final. A request that is not idempotent (a POST, unless the caller
 * says `idempotent: true`) is re-sent only where the vendor cannot have acted (see vendorDidNotAct). Attempts
 * and waits are bounded by `settings` (maxAttempts, budgetMs). The request's class (its permit's, and its
 * reports') is the one its path's pattern names, else the caller's `class` (request-classifier.ts).
 */
export async function vendorCall<T>(
  deps: VendorCallDeps,
  setId: string,
  request: VendorRequestOptions,
): Promise<ResourceResponse<T>> {
  const { clock, settings, signal } = { ...deps, signal: request.signal };
  const idempotent = request.idempotent ?? IDEMPOTENT_METHODS.has(request.method);
  const startedAt = clock.now();
  let token = await deps.tokens.get(setId, { signal });
  let rejectionRetried = false;
  // A long wait for room can outlive a token (or two): take a fresh one each time, never one seen dead.
  const deadTokens = new Set<string>();
  const renewed = new Set<string>();
  for (let attempt = 1; ; attempt++) {
    const path = typeof request.path === 'function' ? request.path(token) : request.path;
    // The class by the path's pattern, else the caller's (request-classifier.ts); a path of a class may be of any
    // safe shape, any other one must be of the resource shape. A path that could never be sent costs no permit.
    const { cls, byPath } =
      typeof path === 'string'
        ? deps.classifier.classify(setId, token, path, request.class)
        : { cls: request.class, byPath: false };
    assertVendorPath(path, byPath);
    // Brokers that list classes take `class` in rate-limit reports; older ones refuse it (and the report with it).
    const reportClass = token.classes === undefined ? undefined : cls;
    // A learned class's answers are reported once per vendor window (rate-feedback.ts): they renew its limits.
    const learned = cls !== undefined && token.classes?.some((c) => c.class === cls && c.learned) === true;
    const vendor = deps.vendorFor(setId, token);
    let permit: PermitHandle;
    try {
      // Taken last, right before sending, with nothing awaited in between: the permit is used while usable.
      permit = await deps.permits.acquire(setId, token.tokenId, {
        class: cls,
        priority: request.priority,
        signal,
        maxWaitMs: request.maxPermitWaitMs,
      });
    } catch (error) {
      if (!isDeadToken(error) || deadTokens.size >= MAX_DEAD_TOKENS) throw error;
      deadTokens.add(token.tokenId);
      deps.tokens.invalidate(setId, token.tokenId);
      token = await deps.tokens.get(setId, { forceRefresh: true, signal });
      if (deadTokens.has(token.tokenId)) throw error;
      attempt--;
      continue;
    }
    // The wait for the permit (or after a 429 or a 5xx) may have taken the token below the floor: never send
    // one so (the vendor would answer 401 to it on the way). The broker is asked for the token to use now, then
    // a permit for that one; the permit taken for the old token is given back.
    // Once per token: when the broker answers the same token, it is the best there is, and it is sent.
    if (!deps.tokens.usable(token) && !renewed.has(token.tokenId)) {
      permit.giveBack();
      renewed.add(token.tokenId);
      deps.telemetry.info('token below the floor after the wait; asking the broker for the token to use', {
        credentialSet: setId,
        tokenId: token.tokenId,
      });
      token = await deps.tokens.get(setId, { forceRefresh: true, signal });
      attempt--;
      continue;
    }
    permit.markUsed();
    try {
      const response = await vendor.request<T>({
        method: request.method,
        path,
        ofClass: byPath,
        token: token.accessToken,
        ...(request.body === undefined ? {} : { body: request.body }),
        ...(signal ? { signal } : {}),
        retry: false,
      });
      deps.feedback.afterSuccess(
        setId,
        token.tokenId,
        response.rateLimit,
        deps.permits.lastKnownWindows(setId, token.tokenId, cls),
        cls,
        reportClass,
        learned,
      );
      return response;
    } catch (error) {
      if (error instanceof VendorCallAbortedError || signal?.aborted) throw aborted(signal, error);
      if (isRejection(error) && !rejectionRetried) {
        rejectionRetried = true;
        deps.telemetry.warn('vendor rejected the token; reporting it', {
          credentialSet: setId,
          tokenId: token.tokenId,
          errorCode: error.code,
          vendorRequestId: error.requestId,
        });
        token = await deps.tokens.afterRejection(setId, token, error.code, error.requestId, signal);
        // The retry is the "once" of the 401 rule: it does not use up one of the 5xx/429 attempts.
        attempt--;
        continue;
      }
      if (!idempotent && !vendorDidNotAct(error)) {
        if (vendorRetryAdvice(error).retryable) {
          deps.telemetry.warn('vendor call failed; not re-sent, the vendor may have acted on it', {
            credentialSet: setId,
            tokenId: token.tokenId,
            method: request.method,
            attempt,
            errorCode: error instanceof VendorError ? error.code : 'UNKNOWN',
            status: error instanceof VendorError ? error.status : undefined,
          });
        }
        throw error;
      }
      const budgetLeftMs = settings.budgetMs - (clock.now() - startedAt);
      const delayMs = await retryDelay(deps, setId, token, error, attempt, budgetLeftMs, reportClass);
      if (delayMs === undefined || attempt >= settings.maxAttempts) throw error;
      const elapsedMs = clock.now() - startedAt;
      if (elapsedMs + delayMs > settings.budgetMs) throw error;
      deps.telemetry.warn('vendor call failed; retrying', {
        credentialSet: setId,
        tokenId: token.tokenId,
        method: request.method,
        attempt,
        delayMs,
        errorCode: error instanceof VendorError ? error.code : 'UNKNOWN',
        status: error instanceof VendorError ? error.status : undefined,
      });
      if (delayMs > 0) {
        await clock.sleep(delayMs, signal).catch((reason: unknown) => {
          throw aborted(signal, reason);
        });
      }
    }
  }
}

/**
 * How long to wait before the next attempt, or undefined when the error is final. Reports a 429 first; the wait
 * after it is Retry-After plus up to RATE_LIMIT_JITTER_MS (as much of it as `budgetLeftMs` allows), while the
 * broker is told Retry-After as the vendor said it.
 */
async function retryDelay(
  deps: VendorCallDeps,
  setId: string,
  token: VendedToken,
  error: unknown,
  attempt: number,
  budgetLeftMs: number,
  reportClass: string | undefined,
): Promise<number | undefined> {
  const limited = rateLimited(error);
  if (limited) {
    const retryAfterSeconds =
      limited.retryAfterSeconds ?? Math.ceil(fullJitterDelayMs(attempt - 1, deps.settings) / 1000);
    // The wait counts from when the ledger has the cooldown.
    await afterVendorRateLimit(deps, setId, token.tokenId, retryAfterSeconds, limited.window, reportClass);
    const retryAfterMs = retryAfterSeconds * 1000;
    const jitterBoundMs = Math.min(RATE_LIMIT_JITTER_MS, Math.max(0, budgetLeftMs - retryAfterMs));
    const jitterMs = Math.min(jitterBoundMs, Math.floor(deps.settings.random() * (jitterBoundMs + 1)));
    return retryAfterMs + jitterMs;
  }
  const advice = vendorRetryAdvice(error);
  if (!advice.retryable) return undefined;
  return advice.retryAfterMs ?? fullJitterDelayMs(attempt - 1, deps.settings);
}
