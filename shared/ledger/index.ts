export { DynamoRateLedger, type DynamoRateLedgerOptions } from './dynamo-ledger.js';
export {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  LedgerRequestError,
  LedgerUnavailableError,
  UnknownPermitClassError,
} from './errors.js';
export type {
  DenialReason,
  GiveBackRequest,
  PermitDecision,
  PermitRequest,
  RateLedger,
  VendorFeedbackReport,
  WindowRemaining,
} from './types.js';
export { type LedgerUsage, usageAt, type WindowUsage } from './usage.js';
