import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

import { powertoolsTelemetry } from './powertools-telemetry.js';
import type { LogAttributes, MetricUnitValue, Telemetry } from './telemetry.js';

export type { LogAttributes, MetricUnitValue, Telemetry };
export { MetricUnit };

// shared/telemetry.ts spells the units out (so that the client's declarations need no Powertools): they must
// stay exactly Powertools' MetricUnit values, both ways.
type PowertoolsUnit = (typeof MetricUnit)[keyof typeof MetricUnit];
const _sameUnits: [PowertoolsUnit, MetricUnitValue] extends [MetricUnitValue, PowertoolsUnit] ? true : never =
  true;
void _sameUnits;

// In metric-names.ts, which imports no Powertools: the CLI builds its CloudWatch queries with them.
export { METRICS_NAMESPACE, SERVICE_NAME } from './metric-names.js';

import { METRICS_NAMESPACE, SERVICE_NAME } from './metric-names.js';

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
  // The same adapter a service's Powertools gets in the client package (shared/powertools-telemetry.ts).
  return { logger, metrics, ...powertoolsTelemetry({ logger, metrics }) };
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
  /** The dimensions the point was also published with (`alsoBy`): one point, counted once by `sum`. */
  alsoBy?: Record<string, string>;
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
  metric(
    name: string,
    unit: MetricUnitValue,
    value: number,
    dimensions: Record<string, string> = {},
    alsoBy?: Record<string, string>,
  ): void {
    this.metrics.push({ name, unit, value, dimensions, ...(alsoBy ? { alsoBy } : {}) });
  }

  /**
   * Sum of a metric's values, optionally only those with the given dimensions: what CloudWatch's series of
   * exactly those dimensions would hold (a dimension given in `alsoBy` matches the point's second series).
   */
  sum(name: string, dimensions: Record<string, string> = {}): number {
    return this.metrics
      .filter((m) => {
        if (m.name !== name) return false;
        const all = { ...m.dimensions, ...m.alsoBy };
        return Object.entries(dimensions).every(([k, v]) => all[k] === v);
      })
      .reduce((total, m) => total + m.value, 0);
  }

  /** Everything recorded, serialised: what a secret-leak assertion greps. */
  dump(): string {
    return JSON.stringify({ logs: this.logs, metrics: this.metrics });
  }
}
