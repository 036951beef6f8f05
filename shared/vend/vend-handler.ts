import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import middy from '@middy/core';
import type { Context, LambdaFunctionURLEventWithIAMAuthorizer } from 'aws-lambda';
import type { Clock } from '../clock.js';
import type { ConsumerConfig } from '../config/consumers.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { OperatorConfig } from '../config/operators.js';
import type { RateLedger } from '../ledger/index.js';
import {
  DIMENSION_CREDENTIAL_SET,
  DIMENSION_ERROR_CODE,
  Metric,
  VEND_SERVER_ERROR_CODES,
  type VendServerErrorCode,
} from '../metric-names.js';
import { MetricUnit, type Telemetry } from '../observability.js';
import { AccessPolicy } from './access-policy.js';
import { readEvent, type VendRequest } from './http-request.js';
import { QuotaView } from './quota-view.js';
import type { RefreshInvoker } from './refresh-invoker.js';
import { ReportLimiter, type ReportLimitSettingsInput } from './report-limits.js';
import { errorResult, type VendResult } from './responses.js';
import type { Audit, SetRouteContext, VendServices } from './route-context.js';
import { matchRoute, type RouteName } from './router.js';
import { listCredentialSets } from './routes/list-route.js';
import { acquirePermits, reportRateLimit, returnPermits } from './routes/permit-routes.js';
import { forceRefresh, getToken, reportTokenRejection } from './routes/token-routes.js';
import { TokenProvider } from './token-provider.js';
import { type CacheStore, TokenStateCache } from './token-state-cache.js';
import { toVendError } from './translate-error.js';
import { VendError } from './vend-errors.js';

export interface VendHandlerDeps {
  sets: readonly CredentialSetConfig[];
  consumers: readonly ConsumerConfig[];
  /** Principals that may read the list (status) route and nothing else (default: none). */
  operators?: readonly OperatorConfig[];
  /** Only read: the vend function never writes the tokens table. */
  store: CacheStore;
  ledger: RateLedger;
  refresher: RefreshInvoker;
  /**
   * Where the report limits are counted, for every container alike: the ledger table (items `report#...`)
   * through the same DynamoDB client. `settings` default as in report-limits.ts.
   */
  reports: { client: DynamoDBClient; tableName: string; settings?: ReportLimitSettingsInput };
  clock: Clock;
  telemetry: Telemetry;
  /** How long a set's state is served from memory (default 30 s). */
  cacheTtlMs?: number;
  /** The same once the token is inside its soft-threshold window (default 1 s). */
  nearThresholdTtlMs?: number;
  /**
   * Between full reads, how often the item's version alone is read to notice a re-login made elsewhere
   * (default 1 s; 0: never, entries then live their TTL).
   */
  versionCheckMs?: number;
  /** How long a request waits for a re-login before answering 503 (default 10 s, on the clock). */
  refreshWaitMs?: number;
  /** Bodies above this are refused with 413 (default 8 KiB). */
  maxBodyBytes?: number;
  /** How long the quota figures of a token answer are served from memory (default 1 s; 0: always read). */
  quotaCacheMs?: number;
}

export type VendEvent = LambdaFunctionURLEventWithIAMAuthorizer;

type SetRoute = (context: SetRouteContext) => Promise<VendResult>;
const SET_ROUTES: Record<Exclude<RouteName, 'listCredentialSets'>, SetRoute> = {
  forceRefresh,
  getToken,
  acquirePermits,
  returnPermits,
  reportTokenRejection,
  reportRateLimit,
};

/**
 * The vend API as a pure function of the Function URL event (payload format 2.0, IAM auth): event in, result
 * out, no AWS client of its own — the deps carry the store, the ledger and the refresher. The order of checks
 * is fixed: route (404/405) → caller (403) → set (404/403) → body and parameters (413/400) → action, so that
 * nothing is read or written for a request that fails a check, and an outsider learns nothing.
 */
export function createVendHandler(deps: VendHandlerDeps) {
  const { clock, telemetry } = deps;
  const policy = new AccessPolicy(deps.sets, deps.consumers, deps.operators);
  const cache = new TokenStateCache({
    store: deps.store,
    clock,
    ttlMs: deps.cacheTtlMs ?? 30_000,
    nearThresholdTtlMs: deps.nearThresholdTtlMs ?? 1_000,
    versionCheckMs: deps.versionCheckMs ?? 1_000,
  });
  const services: VendServices = {
    provider: new TokenProvider({
      cache,
      refresher: deps.refresher,
      clock,
      refreshWaitMs: deps.refreshWaitMs ?? 10_000,
    }),
    ledger: deps.ledger,
    quota: new QuotaView({ ledger: deps.ledger, clock, ttlMs: deps.quotaCacheMs ?? 1_000 }),
    clock,
    telemetry,
    maxBodyBytes: deps.maxBodyBytes ?? 8 * 1024,
    reports: new ReportLimiter({ ...deps.reports, clock }),
  };

  async function dispatch(request: VendRequest, audit: Audit): Promise<VendResult> {
    const route = matchRoute(request);
    audit.route = route.name;
    // Logged before the check, so a refused caller is on record too (an ARN-shaped value only).
    if (request.callerArn && /^arn:[\w+=,.@/:-]{1,300}$/.test(request.callerArn))
      audit.caller = request.callerArn;
    const caller = policy.identify(request.callerArn, request.callerAccountId);
    audit.consumers = caller.consumers;
    if (caller.operators.length > 0) audit.operators = caller.operators;
    if (route.name === 'listCredentialSets') {
      return listCredentialSets({ caller, sets: policy.setsOf(caller), audit, services });
    }
    const setId = route.setId ?? '';
    const set =
      route.name === 'forceRefresh'
        ? policy.authorizeRefresh(caller, setId)
        : policy.authorize(caller, setId);
    audit.credentialSet = set.id;
    return SET_ROUTES[route.name]({ request, caller, set, audit, services });
  }

  async function handle(event: VendEvent, context: Context | undefined): Promise<VendResult> {
    const started = performance.now();
    const request = readEvent(event, context?.awsRequestId ?? randomUUID());
    const audit: Audit = {};
    let result: VendResult;
    let failure: VendError | undefined;
    try {
      result = await dispatch(request, audit);
    } catch (error) {
      failure = toVendError(error, audit.credentialSet);
      result = errorResult(failure ?? error, request.requestId, clock.now());
      audit.decision ??= failure?.code ?? 'INTERNAL_ERROR';
      // What was behind a 503 (the refresher's or the store's error code), for whoever reads the logs.
      if (failure?.cause) audit.cause = codeOrName(failure.cause);
      if (!failure) {
        telemetry.error('vend request failed unexpectedly', {
          requestId: request.requestId,
          errorName: error instanceof Error ? error.name : typeof error,
          errorCode: codeOrName(error),
        });
      }
    }
    const latencyMs = performance.now() - started;
    telemetry.info('vend request', {
      requestId: request.requestId,
      status: result.statusCode,
      ...audit,
      latencyMs: Math.round(latencyMs * 1000) / 1000,
    });
    telemetry.metric(
      Metric.VendLatency,
      MetricUnit.Milliseconds,
      latencyMs,
      audit.credentialSet ? { [DIMENSION_CREDENTIAL_SET]: audit.credentialSet } : {},
    );
    if (result.statusCode >= 500) countServerError(failure?.code);
    return result;
  }

  /**
   * Every 5xx answer counts once under its error code: what the 5xx alarms (and a deployment's rollback) see.
   * No CredentialSet dimension: the alarms stay one per code, and the `vend request` log line names the set.
   */
  function countServerError(code: string | undefined): void {
    const known = VEND_SERVER_ERROR_CODES.find((c) => c === code);
    const errorCode: VendServerErrorCode = known ?? 'INTERNAL_ERROR';
    telemetry.metric(Metric.VendServerError, MetricUnit.Count, 1, { [DIMENSION_ERROR_CODE]: errorCode });
  }

  return middy<VendEvent, VendResult>(handle).use({
    // Last resort (e.g. middy's own early timeout): still the error body, never a stack trace.
    onError: (request) => {
      telemetry.error('vend handler failed outside the request pipeline', {
        errorName: request.error instanceof Error ? request.error.name : typeof request.error,
      });
      request.response = errorResult(
        request.error,
        readEvent(request.event, request.context?.awsRequestId ?? randomUUID()).requestId,
        clock.now(),
      );
      // The code errorResult answered with: a VendError's own, else INTERNAL_ERROR.
      if (request.response.statusCode >= 500)
        countServerError(request.error instanceof VendError ? request.error.code : undefined);
    },
  });
}

/** An error's stable code, else its class name: never its message, which might quote input. */
function codeOrName(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : typeof error;
}
