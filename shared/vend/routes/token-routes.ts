import type { CredentialSetConfig } from '../../config/credential-sets.js';
import type { ClassPaths } from '../../config/request-classes.js';
import type { WindowRemaining } from '../../ledger/index.js';
import { DIMENSION_CREDENTIAL_SET, Metric } from '../../metric-names.js';
import { MetricUnit } from '../../observability.js';
import { type TokenView, validitySeconds } from '../../tokens/token-state.js';
import { readJsonBody, readQueryParameter } from '../http-request.js';
import { ledgerKeyFor } from '../ledger-key.js';
import { ReportLimitedError } from '../report-limits.js';
import { parseBody, tokenRejectionBody } from '../request-bodies.js';
import { jsonResult, type VendResult } from '../responses.js';
import type { SetRouteContext, VendServices } from '../route-context.js';
import type { ProvidedToken } from '../token-provider.js';
import { BadRequestError } from '../vend-errors.js';
import { admitReport, reloginGate } from './report-guards.js';

/**
 * `minValiditySeconds`: by default the vendor's rule (re-login 5 minutes before `exp`), which is the token's
 * hard floor: 300 s unless configured otherwise or the token lives so short that a tenth of its life is less,
 * and compressed with the rest of time in the local broker (undefined here: the provider applies it). A
 * given value is a whole number from 0 up to the set's soft threshold. The cap is what keeps on-demand
 * re-logins inside the schedule's budget: a token with less than the soft threshold left is due for a
 * re-login anyway, so no consumer can force a login for a token the refresher would still keep (and a value
 * above any token's lifetime would otherwise ask for a login on every request).
 */
export function parseMinValidity(context: SetRouteContext): number | undefined {
  const raw = readQueryParameter(context.request, 'minValiditySeconds');
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw)) {
    throw new BadRequestError('INVALID_FORMAT', 'minValiditySeconds', 'must be a whole number of seconds');
  }
  const value = Number(raw);
  const max = context.set.refresh.softThresholdSeconds;
  if (value > max) throw new BadRequestError('INVALID_VALUE', 'minValiditySeconds', `must be at most ${max}`);
  return value;
}

/** What is left of the token's quota; null when the ledger cannot say (the token is still worth having). */
async function quotaOf(
  services: VendServices,
  set: CredentialSetConfig,
  token: TokenView,
): Promise<WindowRemaining[] | null> {
  try {
    return await services.quota.remaining(ledgerKeyFor(set, token.tokenId), set.rateLimits, set.id);
  } catch (error) {
    services.telemetry.warn('quota unknown: the ledger did not answer', {
      credentialSet: set.id,
      tokenId: token.tokenId,
      errorCode: (error as { code?: unknown })?.code ?? 'UNKNOWN',
    });
    return null;
  }
}

export async function tokenBody(services: VendServices, set: CredentialSetConfig, token: TokenView) {
  return {
    credentialSet: set.id,
    environment: set.environment,
    accessToken: token.accessToken,
    tokenId: token.tokenId,
    expiresAt: token.exp,
    /** On the vendor's clock as measured at login: what the vendor itself would say is left. */
    expiresInSeconds: validitySeconds(token, services.clock.now()),
    tenant: token.tenant,
    companyKey: token.companyKey,
    executionPlatformKey: token.executionPlatformKey,
    userKey: token.userKey,
    /** Where the consumer sends its vendor calls with this token. */
    vendorBaseUrl: set.vendorBaseUrl,
    quota: await quotaOf(services, set, token),
    /** Every class of the set, in configuration order, with its path patterns: the client classifies by them. */
    classes: classesOf(set),
  };
}

/**
 * The set's request classes as the consumer needs them: each class (configuration order, which decides where
 * patterns overlap) with its path patterns, `[]` for a class that callers name by hand, and whether its limits
 * are learned (configured `[]`): the client then reports its answers' headers once per vendor window, which
 * renews what one caller taught (docs/class-limits.md, "Trust").
 */
const classesOf = ({ rateLimits }: CredentialSetConfig): (ClassPaths & { learned: boolean })[] =>
  Object.entries(rateLimits.classes).map(([name, limits]) => ({
    class: name,
    paths: rateLimits.classPaths[name] ?? [],
    learned: limits.length === 0,
  }));

function noted(context: SetRouteContext, provided: ProvidedToken, decision: string): void {
  context.audit.tokenId = provided.token.tokenId;
  context.audit.source = provided.source;
  context.audit.decision = decision;
}

/** GET /v1/credential-sets/{id}/token?minValiditySeconds=N */
export async function getToken(context: SetRouteContext): Promise<VendResult> {
  const { set, services } = context;
  const minValiditySeconds = parseMinValidity(context);
  const provided = await services.provider.usableToken(set, minValiditySeconds);
  noted(context, provided, provided.loggedIn ? 'VENDED_AFTER_LOGIN' : 'VENDED');
  const body = await tokenBody(services, set, provided.token);
  services.telemetry.metric(Metric.TokensVended, MetricUnit.Count, 1, { [DIMENSION_CREDENTIAL_SET]: set.id });
  return jsonResult(200, body);
}

/**
 * POST /v1/credential-sets/{id}/token/rejections: the vendor answered 401 to a consumer's call. A rejection
 * of the previous (or an older) token answers the current one; a rejection of the current token re-logs in,
 * at most once per `rejectionReloginIntervalSeconds` per set for any number of callers (a consumer's word is
 * not proof, and each re-login may cut off every other consumer's token): past that, 429 with Retry-After.
 */
export async function reportTokenRejection(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  const report = parseBody(tokenRejectionBody(), readJsonBody(context.request, services.maxBodyBytes));
  audit.rejectedTokenId = report.tokenId;
  audit.vendorErrorCode = report.errorCode;
  if (report.requestId) audit.vendorRequestId = report.requestId;
  // Over the report limit: 429 and nothing else (no read, no re-login); the caller's GET still works.
  await admitReport(context, 'rejectionReports');
  services.telemetry.metric(Metric.TokenRejectionsReported, MetricUnit.Count, 1, {
    [DIMENSION_CREDENTIAL_SET]: set.id,
  });
  let provided: ProvidedToken;
  try {
    provided = await services.provider.afterRejection(set, report.tokenId, reloginGate(context));
  } catch (error) {
    if (error instanceof ReportLimitedError && error.details?.reason === 'RELOGIN_LIMIT')
      audit.decision = 'RELOGIN_LIMITED';
    throw error;
  }
  noted(context, provided, provided.loggedIn ? 'RELOGIN_AFTER_REJECTION' : 'CURRENT_AFTER_REJECTION');
  const body = await tokenBody(services, set, provided.token);
  return jsonResult(200, { ...body, reloggedIn: provided.loggedIn });
}

/**
 * POST /v1/credential-sets/{id}/refresh: an operator (`refresh: true`) forces a re-login of the set. The answer
 * names the new token by id and expiry, never the token itself: an operator gets no token.
 */
export async function forceRefresh(context: SetRouteContext): Promise<VendResult> {
  const { set, services, audit } = context;
  // No body, or an empty object: anything else is input this route would silently ignore.
  if ((context.request.rawBody ?? '').trim() !== '') {
    const body = readJsonBody(context.request, services.maxBodyBytes);
    const [field] = Object.keys(body);
    if (field !== undefined)
      throw new BadRequestError('INVALID_VALUE', field, 'this request takes no fields');
  }
  const provided = await services.provider.forceRefresh(set);
  audit.tokenId = provided.token.tokenId;
  if (provided.replacedTokenId) audit.rejectedTokenId = provided.replacedTokenId;
  audit.source = provided.source;
  audit.decision = provided.loggedIn ? 'REFRESHED' : 'REFRESHED_ELSEWHERE';
  const { token } = provided;
  return jsonResult(200, {
    credentialSet: set.id,
    environment: set.environment,
    tokenId: token.tokenId,
    expiresAt: token.exp,
    expiresInSeconds: validitySeconds(token, services.clock.now()),
    /** This request's login made it; false when another login (a concurrent refresh, the schedule) did. */
    loggedIn: provided.loggedIn,
    /** When the broker received the token (ISO 8601). */
    refreshedAt: new Date(token.obtainedAt).toISOString(),
    ...(provided.replacedTokenId ? { replacedTokenId: provided.replacedTokenId } : {}),
  });
}
