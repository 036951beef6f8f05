export { DynamoRateLedger, type DynamoRateLedgerOptions } from './dynamo-ledger.js';
export {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  LedgerRequestError,
  LedgerUnavailableError,
  type ReceiptProblem,
  ReceiptRejectedError,
  UnknownPermitClassError,
} from './errors.js';
export type {
  DenialReason,
  GiveBackRequest,
  GiveBackResult,
  LedgerUsage,
  NotRecordedReason,
  PartUsage,
  PermitDecision,
  PermitRequest,
  RateLedger,
  ReservationUsage,
  VendorFeedbackReport,
  WindowRemaining,
  WindowUsage,
} from './types.js';
export { usageAt } from './usage.js';
