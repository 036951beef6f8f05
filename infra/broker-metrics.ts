import type { Duration } from 'aws-cdk-lib';
import { Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { DIMENSION_CREDENTIAL_SET, type MetricName } from '../shared/metric-names.js';
import { METRICS_NAMESPACE, SERVICE_NAME } from '../shared/observability.js';

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
 * ErrorCode): a SEARCH expression, for dashboards (alarms cannot use SEARCH).
 */
export function setSearch(name: MetricName, setId: string, statistic: string, period: Duration): string {
  return `SEARCH('Namespace="${METRICS_NAMESPACE}" MetricName="${name}" ${DIMENSION_CREDENTIAL_SET}="${setId}"', '${statistic}', ${period.toSeconds()})`;
}
