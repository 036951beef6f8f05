import type { Duration } from 'aws-cdk-lib';
import { type IMetric, MathExpression } from 'aws-cdk-lib/aws-cloudwatch';

/**
 * The sum of metrics, each FILLed with 0: a series with no data point in a period would otherwise make the whole
 * sum missing (and an alarm on it INSUFFICIENT_DATA rather than OK).
 */
export const filledSum = (
  label: string,
  metrics: Record<string, IMetric>,
  period: Duration,
): MathExpression =>
  new MathExpression({
    expression: Object.keys(metrics)
      .map((id) => `FILL(${id}, 0)`)
      .join(' + '),
    usingMetrics: metrics,
    label,
    period,
  });
