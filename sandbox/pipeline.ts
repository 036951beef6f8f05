import type { IncomingHttpHeaders } from 'node:http';
import {
  type Answer,
  errorAnswer,
  genericCodeFor,
  type RequestContext,
  rateLimitAnswer,
  rateLimitHeaders,
  vendorError,
} from './answers.js';
import { type FaultQueue, faultAnswer } from './faults.js';
import { handleLogin } from './login.js';
import type { RateLimiter } from './rate-limiter.js';
import { handleResource } from './resources.js';
import type { ResolvedSettings } from './settings.js';
import type { StatsRecorder } from './stats.js';
import type { ResourceStore } from './store.js';
import type { TokenAuthority } from './tokens.js';

export interface VendorRequest {
  route: 'login' | 'resources';
  method: string;
  pathname: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface PipelineParts {
  settings: ResolvedSettings;
  tokens: TokenAuthority;
  limiter: RateLimiter;
  store: ResourceStore;
  stats: StatsRecorder;
  faults: FaultQueue;
  /** Waits real time (latencyMs); settles early when the sandbox closes. */
  delay(ms: number): Promise<void>;
}

type BearerToken = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'token'; token: string };

function bearerToken(header: string | undefined): BearerToken {
  const value = header?.trim() ?? '';
  if (value === '' || /^bearer$/i.test(value)) return { kind: 'missing' };
  const match = /^bearer\s+(\S+)$/i.exec(value);
  return match?.[1] ? { kind: 'token', token: match[1] } : { kind: 'malformed' };
}

/**
 * The vendor's side of one request, in the documented order: outage → injected faults → failureRate →
 * latency → auth → rate limit → path/body → store. Returns the answer and the jti it was made for.
 */
export async function answerVendorRequest(
  request: VendorRequest,
  ctx: RequestContext,
  parts: PipelineParts,
): Promise<{ answer: Answer; jti?: string }> {
  const { settings } = parts;
  if (settings.outage || (settings.loginOutage && request.route === 'login')) {
    return { answer: errorAnswer(ctx, 503, 'SERVICE_UNAVAILABLE', 'Service temporarily unavailable') };
  }
  const fault = parts.faults.take(request.route);
  if (fault) return { answer: faultAnswer(fault, ctx, settings.limits) };
  // random() is called only when failures are enabled, so a seeded sequence stays predictable:
  // one draw decides, a second picks the status.
  if (settings.failureRate > 0 && settings.random() < settings.failureRate) {
    const statuses = settings.failureStatuses;
    const status =
      statuses[Math.min(statuses.length - 1, Math.floor(settings.random() * statuses.length))] ?? 500;
    return { answer: errorAnswer(ctx, status, genericCodeFor(status), 'Simulated server failure') };
  }
  if (settings.latencyMs > 0) await parts.delay(settings.latencyMs);

  if (request.route === 'login') return handleLogin(request.body, ctx, settings, parts.tokens);

  const bearer = bearerToken(request.headers.authorization);
  if (bearer.kind === 'missing') return { answer: vendorError(ctx, 'TOKEN_MISSING', 'No bearer token') };
  if (bearer.kind === 'malformed') {
    return { answer: vendorError(ctx, 'TOKEN_INVALID', 'Authorization header is not "Bearer <token>"') };
  }
  const check = await parts.tokens.verify(bearer.token, ctx.now());
  if (!check.ok) {
    const message = check.code === 'TOKEN_EXPIRED' ? 'Token has expired' : 'Token is invalid';
    return { answer: vendorError(ctx, check.code, message), jti: check.jti };
  }
  const { jti } = check.claims;
  // Per token (§8), or per login user when the sandbox plays a vendor that counts that way.
  const quotaKey = settings.rateLimitScope === 'user' ? `user:${check.claims.username}` : jti;
  const verdict = parts.limiter.consume(quotaKey, ctx.now(), settings.limits, settings.windowKind);
  if (!verdict.allowed) return { answer: rateLimitAnswer(verdict.headers, verdict.retryAfterSeconds), jti };
  parts.stats.tokenRequest(jti);

  const answer = handleResource(
    request.method,
    request.pathname,
    request.body,
    ctx,
    check.claims,
    parts.store,
  );
  if (verdict.headers) answer.headers = { ...rateLimitHeaders(verdict.headers), ...answer.headers };
  return { answer, jti };
}
