/**
 * Every CloudWatch metric the broker emits (namespace TokenBroker). The functions emit them, the CDK
 * stack alarms on them and draws them on the dashboard: one list, so they cannot drift apart.
 * Per-set metrics carry the dimension `CredentialSet`.
 */
export const DIMENSION_CREDENTIAL_SET = 'CredentialSet';
/** Powertools' `service` dimension on every metric, and the namespace. */
export const SERVICE_NAME = 'token-broker';
export const METRICS_NAMESPACE = 'TokenBroker';
/**
 * The consumer's name from the stage config (`consumers[].name`), on the permit metrics only, as a second
 * series beside the per-set one (PERMIT_METRICS): bounded by the config (at most 500 consumers), never the
 * caller's ARN or anything a caller sends. A caller no consumer rule names gets no permit, so no series.
 */
export const DIMENSION_CONSUMER = 'Consumer';
/** Added to LoginFailure beside CredentialSet: the vendor's errorCode or the broker's own. */
export const DIMENSION_ERROR_CODE = 'ErrorCode';
/** LeaseRenewalRefused's second series: why (shared/regions/renewer-clock.ts, RenewalRefusal). */
export const DIMENSION_REASON = 'Reason';

/**
 * The error codes of vend's 5xx answers, the only values of VendServerError's ErrorCode: one series and one
 * alarm each, so the list is short and fixed (a 5xx of any other code would be counted as INTERNAL_ERROR).
 */
export const VEND_SERVER_ERROR_CODES = ['LEDGER_UNAVAILABLE', 'TOKEN_UNAVAILABLE', 'INTERNAL_ERROR'] as const;
export type VendServerErrorCode = (typeof VEND_SERVER_ERROR_CODES)[number];

export const Metric = {
  // Refresher
  LoginSuccess: 'LoginSuccess',
  /** Any failed login attempt (all causes). */
  LoginFailure: 'LoginFailure',
  /** The vendor answered INVALID_CREDENTIALS: the password is wrong or was rotated. */
  CredentialsRejected: 'CredentialsRejected',
  /** 5xx, 429, timeout or network failure on login: the vendor, not the credentials. */
  VendorUnavailable: 'VendorUnavailable',
  /** A new token's `env` claim named the other environment; the token was discarded. */
  EnvMismatch: 'EnvMismatch',
  /** Seconds of validity left on the current token (0 when none), at each run. */
  TokenValiditySeconds: 'TokenValiditySeconds',
  /** 1 when the set has no usable token at a run, else 0. */
  NoUsableToken: 'NoUsableToken',
  /** Another process held the refresh lease. */
  LeaseContention: 'LeaseContention',
  /** The vendor's clock minus ours, at most, from the login response `Date` header (whole seconds) and timing. */
  VendorClockSkewSeconds: 'VendorClockSkewSeconds',
  /** 1 per run started by the schedule (not on demand): the heartbeat of the schedule itself. */
  ScheduledRun: 'ScheduledRun',
  // Vend
  TokensVended: 'TokensVended',
  /** Permits (not requests) granted: per set, and per set and Consumer. */
  PermitsGranted: 'PermitsGranted',
  /** Permits given back unused (taken back by the ledger): per set, and per set and Consumer. */
  PermitsReturned: 'PermitsReturned',
  /** Permits asked for and refused (429): per set, and per set and Consumer. */
  PermitsDenied: 'PermitsDenied',
  TokenRejectionsReported: 'TokenRejectionsReported',
  VendorRateLimitReported: 'VendorRateLimitReported',
  /**
   * 1 per learned class limit below a configured limit of that class (same or shorter window), each time a report
   * teaches one: the vendor allows less than the configuration says (docs/runbook.md). Per set.
   */
  ClassLimitBelowConfigured: 'ClassLimitBelowConfigured',
  /**
   * 1 per class limit a rise adopted (docs/class-limits.md, R3): the vendor now allows more than the broker held,
   * checked with a bounded probe above the kept limit (docs/runbook.md, "Class limit raised"). Per set.
   */
  ClassLimitRaised: 'ClassLimitRaised',
  VendLatency: 'VendLatency',
  /** 1 per 5xx answer, with dimension ErrorCode (one of VEND_SERVER_ERROR_CODES) and no CredentialSet. */
  VendServerError: 'VendServerError',
  /**
   * 1 per ledger decision refused because this process's clock is more than 10 minutes from DynamoDB's (no
   * dimension but service): that process grants nothing until its clock is fixed.
   */
  LedgerClockSkewRefused: 'LedgerClockSkewRefused',
  // Lease renewer (two Regions)
  /**
   * 1 per ledger key renewal the lease renewer refused because its ledger time (DynamoDB's clock, corrected) is
   * not known well enough (shared/regions/renewer-clock.ts): renewed nothing, adopted nothing. No dimension but
   * service, and a second series with `Reason` (unmeasured, uncertain, skew).
   */
  LeaseRenewalRefused: 'LeaseRenewalRefused',
  /** 1 per ledger key renewal that failed (lease store, ledger, or a newer renewal adopted first). */
  LeaseRenewalFailed: 'LeaseRenewalFailed',
} as const;
export type MetricName = (typeof Metric)[keyof typeof Metric];

/**
 * The permit accounting metrics: each point is published twice in one EMF record, with dimensions
 * {service, CredentialSet} (what the alarms and the per-set graphs read) and {service, CredentialSet, Consumer}
 * (the per-consumer widget and `token-broker status --consumers`).
 */
export const PERMIT_METRICS = [Metric.PermitsGranted, Metric.PermitsReturned, Metric.PermitsDenied] as const;

/**
 * A permit metric per consumer (the series with dimensions {service, CredentialSet, Consumer}) as a Metrics
 * Insights query: one series per consumer of one set (`setId`), or per consumer and set across all sets, the
 * highest first. The consumers are the config's names, so one set has at most as many series as the stage has
 * consumers (500): within the 500 series a Metrics Insights query returns. The dashboard draws it and
 * `token-broker status --consumers` reads it (GetMetricData), so both read the same series.
 */
export function consumerInsightsQuery(
  name: (typeof PERMIT_METRICS)[number],
  options: { setId?: string; limit: number },
): string {
  if (options.setId !== undefined && !/^[\w-]+$/.test(options.setId))
    throw new Error('a credential set id is letters, digits, - and _');
  const where =
    `service = '${SERVICE_NAME}'` +
    (options.setId === undefined ? '' : ` AND ${DIMENSION_CREDENTIAL_SET} = '${options.setId}'`);
  const groupBy =
    options.setId === undefined ? `${DIMENSION_CREDENTIAL_SET}, ${DIMENSION_CONSUMER}` : DIMENSION_CONSUMER;
  return (
    `SELECT SUM(${name}) FROM SCHEMA("${METRICS_NAMESPACE}", ${DIMENSION_CONSUMER}, ${DIMENSION_CREDENTIAL_SET}, service) ` +
    `WHERE ${where} GROUP BY ${groupBy} ORDER BY SUM() DESC LIMIT ${options.limit}`
  );
}
