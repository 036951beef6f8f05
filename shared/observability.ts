import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

import type { LogAttributes, MetricUnitValue, Telemetry } from './telemetry.js';

export type { LogAttributes, MetricUnitValue, Telemetry };
export { MetricUnit };

// shared/telemetry.ts spells the units out (so that the client's declarations need no Powertools): they must
// stay exactly Powertools' MetricUnit values, both ways.
type PowertoolsUnit = (typeof MetricUnit)[keyof typeof MetricUnit];
const _sameUnits: [PowertoolsUnit, MetricUnitValue] extends [MetricUnitValue, PowertoolsUnit] ? true : never =
  true;
void _sameUnits;

export const SERVICE_NAME = 'token-broker';
export const METRICS_NAMESPACE = 'TokenBroker';

/** Structured JSON logs (Powertools Logger) and EMF metrics (Powertools Metrics). */
export function createPowertoolsTelemetry(
  options: { serviceName?: string; namespace?: string } = {},
): Telemetry & {
  logger: Logger;
  metrics: Metrics;
} {
  const serviceName = options.serviceName ?? SERVICE_NAME;
  const logger = new Logger({ serviceName });
  const metrics = new Metrics({ namespace: options.namespace ?? METRICS_NAMESPACE, serviceName });
  return {
    logger,
    metrics,
    debug: (message, attributes) => logger.debug(message, attributes ?? {}),
    info: (message, attributes) => logger.info(message, attributes ?? {}),
    warn: (message, attributes) => logger.warn(message, attributes ?? {}),
    error: (message, attributes) => logger.error(message, attributes ?? {}),
    metric(name, unit, value, dimensions = {}) {
      const single = metrics.singleMetric();
      for (const [key, dimensionValue] of Object.entries(dimensions))
        single.addDimension(key, dimensionValue);
      // A single metric publishes itself on addMetric.
      single.addMetric(name, unit, value);
    },
  };
}

export interface RecordedLog {
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  attributes: LogAttributes;
}
export interface RecordedMetric {
  name: string;
  unit: MetricUnitValue;
  value: number;
  dimensions: Record<string, string>;
}

/** Keeps everything in memory: for tests (assert on it) and benchmarks (stay quiet). */
export class MemoryTelemetry implements Telemetry {
  readonly logs: RecordedLog[] = [];
  readonly metrics: RecordedMetric[] = [];

  debug(message: string, attributes: LogAttributes = {}): void {
    this.logs.push({ level: 'debug', message, attributes });
  }
  info(message: string, attributes: LogAttributes = {}): void {
    this.logs.push({ level: 'info', message, attributes });
  }
  warn(message: string, attributes: LogAttributes = {}): void {
    this.logs.push({ level: 'warn', message, attributes });
  }
  error(message: string, attributes: LogAttributes = {}): void {
    this.logs.push({ level: 'error', message, attributes });
  }
  metric(name: string, unit: MetricUnitValue, value: number, dimensions: Record<string, string> = {}): void {
    this.metrics.push({ name, unit, value, dimensions });
  }

  /** Sum of a metric's values, optionally only those with the given dimensions. */
  sum(name: string, dimensions: Record<string, string> = {}): number {
    return this.metrics
      .filter((m) => m.name === name && Object.entries(dimensions).every(([k, v]) => m.dimensions[k] === v))
      .reduce((total, m) => total + m.value, 0);
  }

  /** Everything recorded, serialised: what a secret-leak assertion greps. */
  dump(): string {
    return JSON.stringify({ logs: this.logs, metrics: this.metrics });
  }
}
