import type { CredentialSetConfig } from '../../config/credential-sets.js';
import { ReceiptRejectedError } from '../../ledger/index.js';
import { largestGrant, planFor } from '../../ledger/limit-plan.js';
import { acceptedVendorOffset } from '../../ledger/validation.js';
import { DIMENSION_CONSUMER, DIMENSION_CREDENTIAL_SET, Metric } from '../../metric-names.js';
import { MetricUnit } from '../../observability.js';
import type { TokenView } from '../../tokens/token-state.js';
import { vendorOffsetOf } from '../../tokens/vendor-offset.js';
import { readJsonBody } from '../http-request.js';
import { ledgerKeyFor } from '../ledger-key.js';
import { parseBody, permitRequestBody, permitReturnBody, rateLimitReportBody } from '../request-bodies.js';
import { jsonResult, noContentResult, type VendResult } from '../responses.js';
import type { SetRouteContext } from '../route-context.js';
import { BadRequestError, PermitsDeniedError } from '../vend-errors.js';
import { admitReport, capFeedback } from './report-guards.js';

/**
 * The consumer rule this caller is for this set (Caller.consumerBySet: the one holding a reservation on it,
 * if any of the caller's rules does), looked up once per request for the ledger and the metrics alike.
 */
const consumerOf = (context: SetRouteContext): string | undefined =>
  context.caller.consumerBySet.get(context.set.id);

/** The consumer's name if it holds a reservation on the set: what picks its reservation in the ledger. */
const reservedConsumer = (set: CredentialSetConfig, consumer: string | undefined): string | undefined =>
  consumer !== undefined && set.rateLimits.reservations?.some((r) => r.consumer === consumer)
    ? consumer
    : undefined;

/**
 * The dimensions of a permit metric: the set, and as a second series the set and the consumer rule this
 * caller is for it (consumerOf: a config name, so the series are bounded by the config; authorize() has
 * already refused any caller without one). Counted in permits, not requests.
 */
function permitDimensions(
  context: SetRouteContext,
  consumer: string | undefined,
): [Record<string, string>, Record<string, string>] {
  return [
    { [DIMENSION_CREDENTIAL_SET]: context.set.id },
    consumer === undefined ? {} : { [DIMENSION_CONSUMER]: consumer },
  ];
}

/**
 * The request's class and count, checked before the token is looked up (a request with several errors is
 * answered for these first). Unknown class: 400. A count above the most one grant can ever give this caller
 * (the ledger's maxCount: the smallest limit that applies, where a window with reservations holds the shared
 * part plus the caller's own reservation; a learned class's limits as learned) could never be granted: refused
 * instead of denied forever, the answer saying the most that can be (`details.maxCount`), so a client whose
 * batch grew too large shrinks it and asks again.
 */
async function checkClassAndCount(
  context: SetRouteContext,
  request: { count: number; class?: string | undefined },
  consumer: string | undefined,
): Promise<void> {
  const { set, services } = context;
  if (request.class !== undefined && !set.rateLimits.classes[request.class])
    throw new BadRequestError('INVALID_VALUE', 'class', 'not a permit class of this credential set');
  const maxCount = await services.ledger.maxCount({
    limits: set.rateLimits,
    setId: set.id,
    ...(request.class === undefined ? {} : { class: request.class }),
    ...(consumer === undefined ? {} : { consumer }),
  });
  if (request.count > maxCount)
    throw new BadRequestError('INVALID_VALUE', 'count', `must be at most ${maxCount}`, { maxCount });
}

/**
 * A give-back returns at most what its grant gave, and no grant of the set can give more than its largest
 * (ledger's largestGrant: the smallest general limit, or with reservations the shared part plus the largest
 * reservation; a class only lowers it): a count above that is not a mistake of the grant's size but bad input.
 * The set's, not this caller's: the receipt's grant may have been made under the reservations of before a deploy.
 */
function checkReturnCount(set: CredentialSetConfig, count: number): void {
  const plan = planFor(set.rateLimits);
  const largest = Math.max(
    largestGrant(plan, undefined, undefined),
    ...(set.rateLimits.reservations ?? []).map((r) => largestGrant(plan, undefined, r.consumer)),
  );
  if (count > largest) throw new BadRequestError('INVALID_VALUE', 'count', `must be at most ${largest}`);
}

/**
 * The token must be the set's current or previous one and not expired: nothing is written for any other id.
 * Returns it, as read (what the route may need of it besides its id: its vendor clock offset).
 */
async function requireLiveToken(context: SetRouteContext, tokenId: string): Promise<TokenView> {
  context.audit.tokenId = tokenId;
  const token = await context.services.provider.liveToken(context.set, tokenId);
  if (!token) {
    throw new BadRequestError('INVALID_VALUE', 'tokenId', 'not a live token of this credential set');
  }
  return token;
}

/**
 * The reported token's vendor clock offset, for the ledger to read the report's reset on its own clock. One the
 * ledger does not accept (a set allowing more than the default 900 s at login, or a refresher clock far off
 * DynamoDB's) is left out and logged: the report still counts, as reports from before the field did.
 */
function vendorOffsetFor(context: SetRouteContext, token: TokenView): { lo: number; hi: number } | undefined {
  const offset = vendorOffsetOf(token);
  if (acceptedVendorOffset(offset)) return offset;
  context.services.telemetry.warn(
    'vendor clock offset beyond what the rate ledger accepts; report sent without it',
    {
      credentialSetId: context.set.id,
      tokenId: token.tokenId,
      vendorOffsetMs: offset,
    },
  );
  return undefined;
}

/** POST /v1/credential-sets/{id}/permits {"tokenId", "count", "class"?} */
export async function acquirePermits(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const request = parseBody(permitRequestBody(), readJsonBody(context.request, services.maxBodyBytes));
  // One lookup for the ledger and the metrics: the caller's consumer rule for this set, which is the one
  // holding a reservation in it when the caller has one (the configuration allows one per principal and set).
  const named = consumerOf(context);
  const consumer = reservedConsumer(set, named);
  await checkClassAndCount(context, request, consumer);
  await requireLiveToken(context, request.tokenId);
  audit.count = request.count;
  const [dimensions, perConsumer] = permitDimensions(context, named);
  const key = ledgerKeyFor(set, request.tokenId);
  services.quota.invalidate(key);
  const decision = await services.ledger.acquire({
    tokenId: key,
    caller: context.caller.principal,
    ...(consumer === undefined ? {} : { consumer }),
    count: request.count,
    ...(request.class === undefined ? {} : { class: request.class }),
    limits: set.rateLimits,
    setId: set.id,
  });
  if (!decision.granted) {
    audit.decision = `DENIED_${decision.reason}`;
    services.telemetry.metric(Metric.PermitsDenied, MetricUnit.Count, request.count, dimensions, perConsumer);
    throw new PermitsDeniedError(`no room for ${request.count} permit(s) yet (${decision.reason})`, {
      retryAfterSeconds: decision.retryAfterSeconds,
      details: {
        reason: decision.reason,
        retryAfterMs: decision.retryAfterMs,
        remaining: decision.remaining,
        available: decision.available,
        maxCount: decision.maxCount,
      },
    });
  }
  audit.decision = 'GRANTED';
  services.telemetry.metric(Metric.PermitsGranted, MetricUnit.Count, decision.count, dimensions, perConsumer);
  return jsonResult(200, {
    credentialSet: set.id,
    tokenId: request.tokenId,
    ...(request.class === undefined ? {} : { class: request.class }),
    granted: decision.count,
    /** Epoch ms: send the requests before this. */
    validUntil: decision.validUntil,
    grantedAt: decision.grantedAt,
    /** Opaque: present it to give unused permits of this grant back (once). */
    receipt: decision.receipt,
    remaining: decision.remaining,
    /** The most one grant could give this caller now (its reservation and the shared part): the next ask's cap. */
    available: decision.available,
    /** The most one grant can ever give this caller (a larger count is 400). */
    maxCount: decision.maxCount,
  });
}

/**
 * POST /v1/credential-sets/{id}/permits/returns {"tokenId", "receipt", "count"}
 * Gives back up to `count` unused permits of the grant the receipt names, taken out of the slot they were
 * counted in; the receipt is spent. A receipt that is forged, another caller's or token's, spent or expired
 * gives nothing back and is answered with a 4xx naming the reason (ReceiptRefusedError). Give-backs are
 * limited per caller and set like reports (429). One the ledger has no place to record (`notRecorded`) is a
 * 200 that returned 0: its permits age out, which is safe, and it is neither an error nor an outage.
 */
export async function returnPermits(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const request = parseBody(permitReturnBody(), readJsonBody(context.request, services.maxBodyBytes));
  checkReturnCount(set, request.count);
  await requireLiveToken(context, request.tokenId);
  // Counted only once it would act, like a report: bad input is refused for free and writes nothing.
  await admitReport(context, 'giveBacks');
  audit.count = request.count;
  const key = ledgerKeyFor(set, request.tokenId);
  services.quota.invalidate(key);
  try {
    const { returned, notRecorded } = await services.ledger.giveBack({
      tokenId: key,
      caller: context.caller.principal,
      receipt: request.receipt,
      count: request.count,
      limits: set.rateLimits,
      setId: set.id,
    });
    audit.decision = notRecorded ? `RETURN_NOT_RECORDED_${notRecorded}` : 'RETURNED';
    audit.returned = returned;
    if (returned > 0) {
      const [dimensions, perConsumer] = permitDimensions(context, consumerOf(context));
      services.telemetry.metric(Metric.PermitsReturned, MetricUnit.Count, returned, dimensions, perConsumer);
    }
    return jsonResult(200, {
      credentialSet: set.id,
      tokenId: request.tokenId,
      returned,
      ...(notRecorded ? { notRecorded } : {}),
    });
  } catch (error) {
    if (error instanceof ReceiptRejectedError) audit.decision = `RETURN_REFUSED_${error.problem}`;
    throw error;
  }
}

/**
 * POST /v1/credential-sets/{id}/rate-limit-reports: a consumer saw a vendor 429 or X-RateLimit-* headers, on an
 * answer of `class` when given (then the headers may teach the class's limit: docs/class-limits.md).
 */
export async function reportRateLimit(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const {
    tokenId,
    class: reportClass,
    ...reported
  } = parseBody(rateLimitReportBody(), readJsonBody(context.request, services.maxBodyBytes));
  // The class is checked first, like every other field: bad input is refused for free and writes nothing.
  if (reportClass !== undefined && !set.rateLimits.classes[reportClass])
    throw new BadRequestError(
      'INVALID_VALUE',
      'class',
      `"${reportClass}" is not a class of this credential set (${Object.keys(set.rateLimits.classes).join(', ') || 'it has none'})`,
    );
  const token = await requireLiveToken(context, tokenId);
  // Counted only once it would act: a malformed report is refused for free and writes nothing.
  await admitReport(context, 'rateLimitReports');
  const vendorOffsetMs = vendorOffsetFor(context, token);
  const report = capFeedback(context, reported, vendorOffsetMs?.hi ?? 0);
  const key = ledgerKeyFor(set, tokenId);
  services.quota.invalidate(key);
  const result = await services.ledger.reportVendorFeedback({
    tokenId: key,
    caller: context.caller.principal,
    limits: set.rateLimits,
    setId: set.id,
    ...report,
    ...(reportClass === undefined ? {} : { class: reportClass }),
    ...(vendorOffsetMs === undefined ? {} : { vendorOffsetMs }),
  });
  audit.decision = report.retryAfterSeconds === undefined ? 'RATE_HEADERS_REPORTED' : 'VENDOR_429_REPORTED';
  if (report.retryAfterSeconds !== undefined) {
    services.telemetry.metric(Metric.VendorRateLimitReported, MetricUnit.Count, 1, {
      [DIMENSION_CREDENTIAL_SET]: set.id,
    });
  }
  const learned = result?.learned;
  if (learned?.changed) {
    audit.learnedClass = learned.class;
    const below = belowConfigured(set.rateLimits.classes[learned.class] ?? [], learned.limits);
    if (below > 0)
      services.telemetry.metric(Metric.ClassLimitBelowConfigured, MetricUnit.Count, below, {
        [DIMENSION_CREDENTIAL_SET]: set.id,
      });
  }
  if (learned?.raised) {
    // R3: the vendor served a bounded probe above the kept limit without a 429; the larger limit is kept now
    // (docs/runbook.md, "Class limit raised").
    audit.learnedClass = learned.class;
    audit.raisedFrom = learned.raised.from.limit;
    audit.raisedTo = learned.raised.to.limit;
    audit.raisedWindowSeconds = learned.raised.to.windowSeconds;
    services.telemetry.metric(Metric.ClassLimitRaised, MetricUnit.Count, 1, {
      [DIMENSION_CREDENTIAL_SET]: set.id,
    });
  }
  return noContentResult();
}

/**
 * How many learned limits of a class are below a configured one of the same or a longer window: the vendor allows
 * less than the configuration says (docs/runbook.md, "Class limit below its configuration").
 */
export const belowConfigured = (
  configured: readonly { limit: number; windowSeconds: number }[],
  learned: readonly { limit: number; windowSeconds: number }[],
): number =>
  learned.filter((l) => configured.some((c) => l.limit < c.limit && l.windowSeconds <= c.windowSeconds))
    .length;
