import type { LogAttributes, MetricUnitValue, Telemetry } from './telemetry.js';

/**
 * What the adapter uses of a Powertools `Logger` (@aws-lambda-powertools/logger 2.x): its level methods, each
 * given the message and one object of attributes, which Powertools merges into the JSON line. Structural, so the
 * client package needs no Powertools: a service passes the Logger it has.
 */
export interface PowertoolsLoggerLike {
  debug(message: string, ...attributes: LogAttributes[]): void;
  info(message: string, ...attributes: LogAttributes[]): void;
  warn(message: string, ...attributes: LogAttributes[]): void;
  error(message: string, ...attributes: LogAttributes[]): void;
}

/** One metric point of Powertools `Metrics.singleMetric()`: written at once (EMF) with its own dimensions. */
interface PowertoolsSingleMetricLike {
  addDimension(name: string, value: string): unknown;
  addMetric(name: string, unit: MetricUnitValue, value: number): unknown;
}

/** What the adapter uses of a Powertools `Metrics` (@aws-lambda-powertools/metrics 2.x). */
export interface PowertoolsMetricsLike {
  singleMetric(): PowertoolsSingleMetricLike;
}

/**
 * A Powertools Logger (and Metrics) as the client's `telemetry`: `new BrokerClient({ brokerUrl, telemetry:
 * powertoolsTelemetry({ logger, metrics }) })`. The client's log lines go to the Logger at their level with their
 * attributes (credential set, token id, never a token); `metric()` points go to the Metrics, each as a single
 * metric (published at once, so none waits for the handler's flush and none mixes with the service's own
 * dimensions). Without `metrics`, points are dropped.
 */
export function powertoolsTelemetry(options: {
  logger: PowertoolsLoggerLike;
  metrics?: PowertoolsMetricsLike;
}): Telemetry {
  const { logger, metrics } = options;
  return {
    debug: (message, attributes) => logger.debug(message, attributes ?? {}),
    info: (message, attributes) => logger.info(message, attributes ?? {}),
    warn: (message, attributes) => logger.warn(message, attributes ?? {}),
    error: (message, attributes) => logger.error(message, attributes ?? {}),
    metric(name, unit, value, dimensions = {}, alsoBy) {
      if (!metrics) return;
      const publish = (all: Record<string, string>) => {
        const single = metrics.singleMetric();
        for (const [key, dimensionValue] of Object.entries(all)) single.addDimension(key, dimensionValue);
        single.addMetric(name, unit, value);
      };
      publish(dimensions);
      // A second record with the extra dimensions (Telemetry's `alsoBy`), as the broker's own telemetry does:
      // Powertools warns on a record whose dimension sets share a key.
      if (alsoBy && Object.keys(alsoBy).length > 0) publish({ ...dimensions, ...alsoBy });
    },
  };
}
