import type { CredentialSetConfig, RateLimit } from '../../config/credential-sets.js';
import { DIMENSION_CREDENTIAL_SET, Metric } from '../../metric-names.js';
import { MetricUnit } from '../../observability.js';
import { readJsonBody } from '../http-request.js';
import { ledgerKeyFor } from '../ledger-key.js';
import { parseBody, permitRequestBody, permitReturnBody, rateLimitReportBody } from '../request-bodies.js';
import { jsonResult, noContentResult, type VendResult } from '../responses.js';
import type { SetRouteContext } from '../route-context.js';
import { BadRequestError, PermitsDeniedError } from '../vend-errors.js';

/** The limits a permit of `permitClass` counts against; 400 for a class the set does not configure. */
function limitsFor(set: CredentialSetConfig, permitClass: string | undefined): RateLimit[] {
  if (permitClass === undefined) return set.rateLimits.general;
  const classLimits = set.rateLimits.classes[permitClass];
  if (!classLimits)
    throw new BadRequestError('INVALID_VALUE', 'class', 'not a permit class of this credential set');
  return [...set.rateLimits.general, ...classLimits];
}

/** A count above the smallest applicable limit could never be granted: refuse it instead of denying forever. */
function checkCount(set: CredentialSetConfig, permitClass: string | undefined, count: number): void {
  const smallest = Math.min(...limitsFor(set, permitClass).map((limit) => limit.limit));
  if (count > smallest) throw new BadRequestError('INVALID_VALUE', 'count', `must be at most ${smallest}`);
}

/** The token must be the set's current or previous one and not expired: nothing is written for any other id. */
async function requireLiveToken(context: SetRouteContext, tokenId: string): Promise<void> {
  context.audit.tokenId = tokenId;
  const token = await context.services.provider.liveToken(context.set, tokenId);
  if (!token) {
    throw new BadRequestError('INVALID_VALUE', 'tokenId', 'not a live token of this credential set');
  }
}

/** POST /v1/credential-sets/{id}/permits {"tokenId", "count", "class"?} */
export async function acquirePermits(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const request = parseBody(permitRequestBody, readJsonBody(context.request, services.maxBodyBytes));
  checkCount(set, request.class, request.count);
  await requireLiveToken(context, request.tokenId);
  audit.count = request.count;
  const dimensions = { [DIMENSION_CREDENTIAL_SET]: set.id };
  services.quota.invalidate(ledgerKeyFor(set, request.tokenId));
  const decision = await services.ledger.acquire({
    tokenId: ledgerKeyFor(set, request.tokenId),
    count: request.count,
    ...(request.class === undefined ? {} : { class: request.class }),
    limits: set.rateLimits,
  });
  if (!decision.granted) {
    audit.decision = `DENIED_${decision.reason}`;
    services.telemetry.metric(Metric.PermitsDenied, MetricUnit.Count, request.count, dimensions);
    throw new PermitsDeniedError(`no room for ${request.count} permit(s) yet (${decision.reason})`, {
      retryAfterSeconds: decision.retryAfterSeconds,
      details: {
        reason: decision.reason,
        retryAfterMs: decision.retryAfterMs,
        remaining: decision.remaining,
      },
    });
  }
  audit.decision = 'GRANTED';
  services.telemetry.metric(Metric.PermitsGranted, MetricUnit.Count, decision.count, dimensions);
  return jsonResult(200, {
    credentialSet: set.id,
    tokenId: request.tokenId,
    ...(request.class === undefined ? {} : { class: request.class }),
    granted: decision.count,
    /** Epoch ms: send the requests before this. */
    validUntil: decision.validUntil,
    /** Epoch ms: quote it when giving permits back. */
    grantedAt: decision.grantedAt,
    remaining: decision.remaining,
  });
}

/**
 * POST /v1/credential-sets/{id}/permits/returns {"tokenId", "count", "grantedAt"?, "class"?}
 * With `grantedAt` (as the grant answered it) the permits are subtracted from the slot they were counted
 * in. Without it nothing is given back (`returned: 0`) and the permits age out with their window: the
 * ledger cannot tell which slot holds them, and subtracting from another consumer's slot could let more
 * requests reach the vendor in some span than its limit.
 */
export async function returnPermits(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const request = parseBody(permitReturnBody, readJsonBody(context.request, services.maxBodyBytes));
  checkCount(set, request.class, request.count);
  if (request.grantedAt !== undefined && request.grantedAt > services.clock.now() + 60_000) {
    throw new BadRequestError('INVALID_VALUE', 'grantedAt', 'is in the future');
  }
  await requireLiveToken(context, request.tokenId);
  audit.count = request.count;
  if (request.grantedAt === undefined) {
    audit.decision = 'RETURN_IGNORED_NO_GRANTED_AT';
    return jsonResult(200, { credentialSet: set.id, tokenId: request.tokenId, returned: 0 });
  }
  services.quota.invalidate(ledgerKeyFor(set, request.tokenId));
  await services.ledger.giveBack({
    tokenId: ledgerKeyFor(set, request.tokenId),
    count: request.count,
    grantedAt: request.grantedAt,
    ...(request.class === undefined ? {} : { class: request.class }),
    limits: set.rateLimits,
  });
  audit.decision = 'RETURNED';
  return jsonResult(200, { credentialSet: set.id, tokenId: request.tokenId, returned: request.count });
}

/** POST /v1/credential-sets/{id}/rate-limit-reports: a consumer saw a vendor 429 or X-RateLimit-* headers. */
export async function reportRateLimit(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const report = parseBody(rateLimitReportBody, readJsonBody(context.request, services.maxBodyBytes));
  await requireLiveToken(context, report.tokenId);
  services.quota.invalidate(ledgerKeyFor(set, report.tokenId));
  await services.ledger.reportVendorFeedback({
    tokenId: ledgerKeyFor(set, report.tokenId),
    limits: set.rateLimits,
    ...(report.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: report.retryAfterSeconds }),
    ...(report.limit === undefined ? {} : { limit: report.limit }),
    ...(report.remaining === undefined ? {} : { remaining: report.remaining }),
    ...(report.reset === undefined ? {} : { reset: report.reset }),
  });
  audit.decision = report.retryAfterSeconds === undefined ? 'RATE_HEADERS_REPORTED' : 'VENDOR_429_REPORTED';
  if (report.retryAfterSeconds !== undefined) {
    services.telemetry.metric(Metric.VendorRateLimitReported, MetricUnit.Count, 1, {
      [DIMENSION_CREDENTIAL_SET]: set.id,
    });
  }
  return noContentResult();
}
