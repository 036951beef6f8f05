import { BrokerError } from '../shared/errors.js';

/** The command line itself is wrong: an unknown command or option, a missing or malformed argument. */
export class UsageError extends BrokerError {
  readonly code = 'USAGE_ERROR';
  /** The command whose usage to show, when known. */
  readonly command: string | undefined;

  constructor(message: string, command?: string) {
    super(message);
    this.command = command;
  }
}

/** The operator stopped an interactive prompt (Ctrl-C, Ctrl-D). */
export class PromptCancelledError extends BrokerError {
  readonly code = 'CANCELLED';
}

/** A Secrets Manager call failed; `code` is the SDK's error name (ResourceNotFoundException, AccessDeniedException …). */
export class SecretWriteError extends BrokerError {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * `--stage` could not give a broker URL: `code` is STACK_NOT_FOUND, NO_VEND_URL (the stage points at no broker:
 * a usage exit), or CloudFormation's error name (AccessDeniedException …).
 */
export class StackLookupError extends BrokerError {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Something named on the command line does not exist (or is not visible to this caller). */
export class NotFoundError extends BrokerError {
  readonly code = 'RESOURCE_NOT_FOUND';
}

/**
 * The CLI package built on its own (packaging/build.ts) has no CDK app: `check-config` runs its schema checks
 * and says that the stack's own checks (the ones `cdk synth` makes) need the repository.
 */
export class StackChecksUnavailableError extends Error {}
