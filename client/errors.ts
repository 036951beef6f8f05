import { BrokerError } from '../shared/errors.js';

/**
 * The broker answered with something other than 2xx. `code` is the vend API's `errorCode` (the vendor's codes
 * where one fits: RATE_LIMIT_EXCEEDED, INSUFFICIENT_PERMISSIONS, …, plus TOKEN_UNAVAILABLE, LEDGER_UNAVAILABLE);
 * `FORBIDDEN` when AWS refused the signed request before it reached the broker (IAM), and
 * `UNEXPECTED_BROKER_RESPONSE` for an answer of neither shape. Never carries a token.
 */
export class BrokerApiError extends BrokerError {
  readonly code: string;
  readonly status: number;
  /** The broker's (Function URL / Lambda) request id, to quote when asking for help. */
  readonly requestId: string | undefined;
  /** From the `Retry-After` header (429, 503). */
  readonly retryAfterSeconds: number | undefined;
  /** The error body's `details` (e.g. `{ field }` of a 400, `{ reason, remaining }` of a 429). */
  readonly details: Record<string, unknown> | undefined;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    requestId?: string | undefined;
    retryAfterSeconds?: number | undefined;
    details?: Record<string, unknown> | undefined;
  }) {
    super(`broker answered ${init.status} ${init.code}: ${init.message.slice(0, 300)}`);
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.details = init.details;
  }
}

/** The broker could not be reached, or did not answer within the client's timeout. */
export class BrokerUnreachableError extends BrokerError {
  readonly code = 'BROKER_UNREACHABLE';
}

/** No permit could be had before the caller's deadline; `retryAfterSeconds` says when one may be. */
export class PermitDeadlineError extends BrokerError {
  readonly code = 'PERMIT_DEADLINE_EXCEEDED';
  readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds: number, options?: { cause?: unknown }) {
    super(message, options);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The caller aborted through its signal (while waiting for the broker, a permit, a backoff or the vendor). */
export class RequestAbortedError extends BrokerError {
  readonly code = 'REQUEST_ABORTED';
}

/** A call the client refuses before asking anyone (e.g. a negative minValiditySeconds); the message names it. */
export class InvalidClientRequestError extends BrokerError {
  readonly code = 'INVALID_CLIENT_REQUEST';
}

/** The client was closed; it hands out nothing more. */
export class ClientClosedError extends BrokerError {
  readonly code = 'CLIENT_CLOSED';
}
