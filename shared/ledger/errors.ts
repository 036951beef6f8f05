import { BrokerError } from '../errors.js';

/**
 * The ledger gave no answer (DynamoDB error, unreachable, or too many concurrent writers): no permit.
 * Callers answer 503; the cause is kept for the logs.
 */
export class LedgerUnavailableError extends BrokerError {
  readonly code = 'LEDGER_UNAVAILABLE';
}

/**
 * This process's clock disagrees with DynamoDB's (ledger-clock.ts): beyond the accepted skew (`refused`: the
 * process grants nothing until its clock is fixed), or not yet measured closely enough to be corrected.
 */
export class LedgerClockSkewError extends LedgerUnavailableError {
  /** DynamoDB's clock minus ours, as far as known (ms). */
  readonly offsetMs: number | undefined;
  readonly refused: boolean;

  constructor(message: string, details: { offsetMs: number | undefined; refused: boolean }) {
    super(message);
    this.offsetMs = details.offsetMs;
    this.refused = details.refused;
  }
}

/** Bad input to the ledger: the vend API answers 400 with the code. Messages never echo a token id. */
export abstract class LedgerRequestError extends BrokerError {}

/** `count` is not an integer from 1 to the smallest limit that applies. */
export class InvalidPermitCountError extends LedgerRequestError {
  readonly code = 'INVALID_PERMIT_COUNT';
}

/** The request names a class that the credential set's rate limits do not define. */
export class UnknownPermitClassError extends LedgerRequestError {
  readonly code = 'UNKNOWN_PERMIT_CLASS';
}

/** Any other malformed field: token id, grantedAt, vendor feedback values. */
export class InvalidLedgerRequestError extends LedgerRequestError {
  readonly code = 'INVALID_LEDGER_REQUEST';
}

/**
 * Why a receipt gave nothing back: MALFORMED (not a receipt), FORGED (not signed by this ledger item, or
 * altered), FOREIGN (issued to another caller, token or set), SPENT (already given back: its id is among
 * the item's spent ids), EXPIRED (past the time its permits could still be given back).
 */
export type ReceiptProblem = 'MALFORMED' | 'FORGED' | 'FOREIGN' | 'SPENT' | 'EXPIRED';

/** A give-back whose receipt cannot be honoured: nothing was changed. The vend API maps `problem` to a 4xx. */
export class ReceiptRejectedError extends LedgerRequestError {
  readonly code = 'RECEIPT_REJECTED';
  readonly problem: ReceiptProblem;

  constructor(problem: ReceiptProblem, message: string) {
    super(`receipt ${problem.toLowerCase()}: ${message}`);
    this.problem = problem;
  }
}
