import type { LogAttributes, MetricUnitValue, Telemetry } from '../shared/observability.js';

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;
type Level = (typeof LEVELS)[number];

/**
 * Telemetry for the local broker: one readable line per log at or above `level`, on stderr, so stdout keeps
 * only what the broker prints for the user. Metrics are counted, not printed (they are CloudWatch's in AWS).
 */
export class ConsoleTelemetry implements Telemetry {
  readonly metricTotals = new Map<string, number>();
  readonly #minLevel: number;
  readonly #write: (line: string) => void;

  constructor(options: { level?: Level; write?: (line: string) => void } = {}) {
    this.#minLevel = LEVELS.indexOf(options.level ?? 'info');
    this.#write = options.write ?? ((line) => process.stderr.write(`${line}\n`));
  }

  #log(level: Level, message: string, attributes: LogAttributes = {}): void {
    if (LEVELS.indexOf(level) < this.#minLevel) return;
    const details = Object.entries(attributes)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
      .join(' ');
    this.#write(
      `${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${message}${details ? ` ${details}` : ''}`,
    );
  }

  debug(message: string, attributes?: LogAttributes): void {
    this.#log('debug', message, attributes);
  }
  info(message: string, attributes?: LogAttributes): void {
    this.#log('info', message, attributes);
  }
  warn(message: string, attributes?: LogAttributes): void {
    this.#log('warn', message, attributes);
  }
  error(message: string, attributes?: LogAttributes): void {
    this.#log('error', message, attributes);
  }
  metric(name: string, _unit: MetricUnitValue, value: number, dimensions: Record<string, string> = {}): void {
    const key = [name, ...Object.entries(dimensions).map(([k, v]) => `${k}=${v}`)].join(' ');
    this.metricTotals.set(key, (this.metricTotals.get(key) ?? 0) + value);
  }
}
