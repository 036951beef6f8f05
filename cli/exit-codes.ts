import { BrokerApiError, BrokerUnreachableError } from '../client/errors.js';
import { BrokerError } from '../shared/errors.js';
import { SecretWriteError, StackLookupError, UsageError } from './errors.js';

/** The CLI's exit codes: stable, documented in `--help` and docs/cli.md. */
export const ExitCode = {
  Ok: 0,
  /** The broker (or Secrets Manager) answered with an error; its code is printed. */
  Failed: 1,
  /** The command line or a configuration is wrong; nothing was asked of anyone. */
  Usage: 2,
  /** The broker or AWS could not be reached, or refused who we are (no credentials, bad signature, IAM). */
  Unreachable: 3,
  /** `status` only: every shown set has a token, but one at least is DEGRADED (its last login failed). */
  Degraded: 4,
  /** `status` only: a shown set has no token to serve (NO_USABLE_TOKEN, CREDENTIALS_REJECTED, ENV_MISMATCH). */
  NoToken: 5,
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

export const EXIT_CODES_HELP = `Exit codes:
  0  success
  1  the broker (or Secrets Manager) answered with an error: its code is printed, e.g. TOKEN_UNAVAILABLE
  2  usage or configuration error (unknown option, invalid stage configuration, no broker URL, a --stage
     whose stack does not exist in its Region or has no VendUrl output …)
  3  unreachable or not authenticated: no answer, no AWS credentials, or AWS refused the signed request
  4  status: the broker answered, and a set shown is DEGRADED (its token still served); none is worse
  5  status: the broker answered, and a set shown has no token (NO_USABLE_TOKEN, CREDENTIALS_REJECTED,
     ENV_MISMATCH); the worst set decides, and status --watch ends with 0 on Ctrl-C
On failure the last line on stderr is "token-broker <command>: error <CODE>: <message>".`;

/**
 * What a 403 from the Function URL itself (not the broker's INSUFFICIENT_PERMISSIONS) comes from: a signature
 * for another Region, keys that are wrong or of another account, a clock more than 5 minutes off, or a principal
 * that may not invoke the URL.
 */
export const FORBIDDEN_HINT =
  'the Function URL refused the signature: check the Region, the access keys and the clock (and that this principal may call lambda:InvokeFunctionUrl)';

/** AWS answers that mean "who you are" failed, not "what you asked". */
const AUTH_FAILURES = new Set([
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'SignatureDoesNotMatch',
  'InvalidClientTokenId',
  'ExpiredToken',
  'ExpiredTokenException',
  'CredentialsProviderError',
  'NETWORK_ERROR',
]);

export interface Failure {
  exit: ExitCodeValue;
  code: string;
  message: string;
  /** The broker's request id, to quote when asking for help. */
  requestId?: string;
}

/** What to print and which exit code to use for anything a command threw. Never includes a secret. */
export function failureOf(error: unknown): Failure {
  if (error instanceof BrokerApiError) {
    const message = error.message.replace(/^broker answered \d+ [A-Z0-9_]+: /, '');
    // FORBIDDEN is AWS itself refusing the signed request before the broker: its own message ("Forbidden")
    // says nothing of why, so the line says what to check.
    const forbidden = error.code === 'FORBIDDEN';
    const failure: Failure = {
      exit: forbidden ? ExitCode.Unreachable : ExitCode.Failed,
      code: error.code,
      message: `${forbidden ? FORBIDDEN_HINT : message} (HTTP ${error.status})`,
    };
    if (error.requestId) failure.requestId = error.requestId;
    return failure;
  }
  if (error instanceof BrokerUnreachableError) {
    return { exit: ExitCode.Unreachable, code: error.code, message: error.message };
  }
  if (error instanceof Error && error.name === 'CredentialsProviderError') {
    return {
      exit: ExitCode.Unreachable,
      code: 'NO_AWS_CREDENTIALS',
      message: 'no AWS credentials found (environment, profile, SSO, container or instance role)',
    };
  }
  if (error instanceof SecretWriteError) {
    return {
      exit: AUTH_FAILURES.has(error.code) ? ExitCode.Unreachable : ExitCode.Failed,
      code: error.code,
      message: error.message,
    };
  }
  if (error instanceof StackLookupError) {
    // A stage that names no deployed broker is the command line's fault, as a missing --url is.
    const usage = error.code === 'STACK_NOT_FOUND' || error.code === 'NO_VEND_URL';
    return {
      exit: usage ? ExitCode.Usage : AUTH_FAILURES.has(error.code) ? ExitCode.Unreachable : ExitCode.Failed,
      code: error.code,
      message: error.message,
    };
  }
  if (error instanceof BrokerError) {
    const usage =
      error.code === 'USAGE_ERROR' || error.code === 'CONFIGURATION_INVALID' || error.code === 'CANCELLED';
    return { exit: usage ? ExitCode.Usage : ExitCode.Failed, code: error.code, message: error.message };
  }
  // A bug of ours: its class name only (a message could quote anything).
  return {
    exit: ExitCode.Failed,
    code: 'INTERNAL_ERROR',
    message: `unexpected ${error instanceof Error ? error.name : typeof error}`,
  };
}

/**
 * The one line a failed command ends with: "token-broker <command>: error <CODE>: <message>", the broker's
 * request id to quote, and for a usage error where to read the usage.
 */
export function failureLine(label: string, error: unknown): { exit: ExitCodeValue; line: string } {
  const failure = failureOf(error);
  const requestId = failure.requestId ? ` (broker requestId ${failure.requestId})` : '';
  const hint =
    error instanceof UsageError
      ? ` (see "token-broker ${error.command ? `${error.command} ` : ''}--help")`
      : '';
  return {
    exit: failure.exit,
    line: `${label}: error ${failure.code}: ${failure.message}${requestId}${hint}`,
  };
}
