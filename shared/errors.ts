/**
 * One small hierarchy: every error the broker raises has a stable string `code` callers switch on,
 * and keeps what caused it in `cause`. Messages never carry a token, a password or a secret value.
 */
export abstract class BrokerError extends Error {
  abstract readonly code: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration value is missing or wrong; the message names it. Raised at cold start. */
export class ConfigurationError extends BrokerError {
  readonly code = 'CONFIGURATION_INVALID';
}
