import type { Duration } from 'aws-cdk-lib';
import { Metric } from 'aws-cdk-lib/aws-cloudwatch';
import {
  DIMENSION_CREDENTIAL_SET,
  METRICS_NAMESPACE,
  type MetricName,
  PERMIT_METRICS,
  SERVICE_NAME,
} from '../shared/metric-names.js';

export { consumerInsightsQuery } from '../shared/metric-names.js';

/**
 * A broker metric of one credential set, as the functions emit it. Powertools adds its `service` dimension
 * to every metric, and CloudWatch tells metrics apart by their exact set of dimensions, so an alarm has to
 * name both `service` and `CredentialSet` to see any data at all.
 */
export function setMetric(name: MetricName, setId: string, statistic: string, period: Duration): Metric {
  return new Metric({
    namespace: METRICS_NAMESPACE,
    metricName: name,
    dimensionsMap: { service: SERVICE_NAME, [DIMENSION_CREDENTIAL_SET]: setId },
    statistic,
    period,
  });
}

/**
 * A broker metric that is not per set (ScheduledRun, VendServerError): `service` and the metric's own
 * dimensions, exactly as the functions emit them.
 */
export function serviceMetric(
  name: MetricName,
  dimensions: Record<string, string>,
  statistic: string,
  period: Duration,
): Metric {
  return new Metric({
    namespace: METRICS_NAMESPACE,
    metricName: name,
    dimensionsMap: { service: SERVICE_NAME, ...dimensions },
    statistic,
    period,
  });
}

/**
 * Every series of one metric for one set, whatever other dimensions it carries (LoginFailure has an
 * ErrorCode): a SEARCH expression, for dashboards (alarms cannot use SEARCH). Not for the permit metrics:
 * each of their points is also in a per-consumer series, which this would count a second time (setMetric).
 */
export function setSearch(name: MetricName, setId: string, statistic: string, period: Duration): string {
  if ((PERMIT_METRICS as readonly string[]).includes(name)) {
    throw new Error(`${name} has per-consumer series too: draw its per-set series with setMetric`);
  }
  return `SEARCH('Namespace="${METRICS_NAMESPACE}" MetricName="${name}" ${DIMENSION_CREDENTIAL_SET}="${setId}"', '${statistic}', ${period.toSeconds()})`;
}

/**
 * Up to this many credential sets a stage gets per-set alarms (7 a set, the set's id in each alarm's name) and
 * a dashboard row per set; above it, one alarm per kind over all sets (a Metrics Insights query grouped by
 * set, each set a contributor) and dashboard graphs across all sets. 20 sets are 140 per-set alarms, 155 with
 * the others: about a third of CloudFormation's 500 resources per stack, leaving the rest to the functions,
 * tables and grants, and a page that names its set for every stage of a team's size. Past it the per-set
 * alarms grow with every set (700 at 100 sets: more than a stack may hold), the grouped ones do not.
 */
export const PER_SET_ALARMS_MAX_SETS = 20;

/** Whether a stage of `sets` credential sets alarms and draws per set (else: across all sets, grouped). */
export const perSetMonitoring = (sets: number): boolean => sets <= PER_SET_ALARMS_MAX_SETS;

/** The Metrics Insights functions of the statistics the broker alarms and draws with. */
const INSIGHTS_FUNCTIONS: Record<string, string> = {
  Maximum: 'MAX',
  Minimum: 'MIN',
  Sum: 'SUM',
  Average: 'AVG',
};

export interface SetInsightsQueryOptions {
  /** `Maximum`, `Minimum`, `Sum` or `Average` (Metrics Insights has no percentiles). */
  statistic: string;
  /** Which series come first (and, with `limit`, which are kept): `DESC` the highest, `ASC` the lowest. */
  order: 'ASC' | 'DESC';
  limit?: number;
  /** Dimensions the metric carries besides `service` and `CredentialSet` (LoginFailure: ErrorCode). */
  extraDimensions?: string[];
}

/**
 * A broker metric of every credential set, one series per set: a Metrics Insights query of exactly the
 * dimensions the functions emit (SCHEMA matches only metrics with that exact set of dimensions), `service`
 * pinned to the broker's as in setMetric, grouped by `CredentialSet`. Usable in an alarm (each series is a
 * contributor) and on a dashboard. Metrics Insights returns at most 500 series per query; ORDER BY decides
 * which ones when there are more.
 */
export function setInsightsQuery(name: MetricName, options: SetInsightsQueryOptions): string {
  const fn = INSIGHTS_FUNCTIONS[options.statistic];
  if (!fn) throw new Error(`Metrics Insights has no function for the statistic ${options.statistic}`);
  const dimensions = [DIMENSION_CREDENTIAL_SET, ...(options.extraDimensions ?? []), 'service'];
  return (
    `SELECT ${fn}(${name}) FROM SCHEMA("${METRICS_NAMESPACE}", ${dimensions.join(', ')}) ` +
    `WHERE service = '${SERVICE_NAME}' GROUP BY ${DIMENSION_CREDENTIAL_SET} ORDER BY ${fn}() ${options.order}` +
    (options.limit === undefined ? '' : ` LIMIT ${options.limit}`)
  );
}

/** Consumers per graph of the per-consumer permit widgets: the busiest, so that a line can be read and named. */
export const TOP_CONSUMERS = 10;
