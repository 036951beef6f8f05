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
import { familyFor, handleFamily, limitLabel } from './families.js';
import { type FaultQueue, faultAnswer } from './faults.js';
import { handleLogin } from './login.js';
import type { Quota, RateLimiter } from './rate-limiter.js';
import type { RequestLog } from './request-log.js';
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
  /** Written to while `recordRequests` is on. */
  requestLog: RequestLog;
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
 * latency → auth → rate limit (general, and the endpoint family's) → path/body → store or family. Returns the
 * answer and the jti it was made for.
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
  const family = familyFor(settings.families, request.pathname);
  const quotas: Quota[] = [{ key: quotaKey, limits: settings.limits }];
  // A family's request counts against its own limits and the general ones together (§8: "lower limits").
  if (family) quotas.push({ key: `${quotaKey}\u0000family:${family.name}`, limits: family.limits });
  const now = ctx.now();
  const verdict = parts.limiter.consumeAll(quotas, now, settings.windowKind);
  const logged = { requestId: ctx.requestId, at: now, quotaKey, ...(family ? { family: family.name } : {}) };
  if (!verdict.allowed) {
    const byFamily = verdict.quota === 1;
    const refusing = quotas[verdict.quota]?.limits[verdict.limit] ?? { limit: 0, windowSeconds: 0 };
    parts.stats.rateLimitRefused(family?.name, byFamily, limitLabel(refusing));
    if (settings.recordRequests) {
      parts.requestLog.add({
        ...logged,
        served: false,
        refusedBy: { ...(byFamily && family ? { family: family.name } : {}), ...refusing },
      });
    }
    // The refusing limit's own headers: a family's 429 shows the family's window, a general one the general.
    return { answer: rateLimitAnswer(verdict.headers, verdict.retryAfterSeconds), jti };
  }
  parts.stats.rateLimitServed(family?.name);
  if (settings.recordRequests) parts.requestLog.add({ ...logged, served: true });
  parts.stats.tokenRequest(jti);

  const answer = family
    ? handleFamily(request.method, request.pathname, request.body, ctx, family)
    : handleResource(request.method, request.pathname, request.body, ctx, check.claims, parts.store);
  // A family's answer carries its most constrained family window; a family without limits, the general one.
  const [general, ofFamily] = verdict.headers;
  const shown = ofFamily ?? general;
  if (shown) answer.headers = { ...rateLimitHeaders(shown), ...answer.headers };
  return { answer, jti };
}
