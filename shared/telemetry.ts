/**
 * The Telemetry interface on its own, without Powertools: the client package's declarations name it
 * (BrokerClientOptions.telemetry), and a consumer's tsc must resolve it without the server's dependencies.
 * shared/observability.ts re-exports it and checks that MetricUnitValue is exactly Powertools' MetricUnit.
 */

/** CloudWatch's metric units: the values of Powertools' `MetricUnit`. */
export type MetricUnitValue =
  | 'Seconds'
  | 'Microseconds'
  | 'Milliseconds'
  | 'Bytes'
  | 'Kilobytes'
  | 'Megabytes'
  | 'Gigabytes'
  | 'Terabytes'
  | 'Bits'
  | 'Kilobits'
  | 'Megabits'
  | 'Gigabits'
  | 'Terabits'
  | 'Percent'
  | 'Count'
  | 'Bytes/Second'
  | 'Kilobytes/Second'
  | 'Megabytes/Second'
  | 'Gigabytes/Second'
  | 'Terabytes/Second'
  | 'Bits/Second'
  | 'Kilobits/Second'
  | 'Megabits/Second'
  | 'Gigabits/Second'
  | 'Terabits/Second'
  | 'Count/Second'
  | 'None';

export type LogAttributes = Record<string, unknown>;

/** What domain code may say about itself. Never pass a token, a password or a secret value. */
export interface Telemetry {
  debug(message: string, attributes?: LogAttributes): void;
  info(message: string, attributes?: LogAttributes): void;
  warn(message: string, attributes?: LogAttributes): void;
  error(message: string, attributes?: LogAttributes): void;
  /**
   * One CloudWatch metric point (Embedded Metric Format in AWS), e.g. dimension `CredentialSet`. With
   * `alsoBy`, the same point is published a second time with those dimensions added (a second series: e.g.
   * per set, and per set and consumer): one event, recorded once in memory.
   */
  metric(
    name: string,
    unit: MetricUnitValue,
    value: number,
    dimensions?: Record<string, string>,
    alsoBy?: Record<string, string>,
  ): void;
}

/** Says nothing: for code that was given no telemetry (a tool, a test that does not look). */
export const SILENT_TELEMETRY: Telemetry = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  metric() {},
};
