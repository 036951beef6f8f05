export {
  DynamoRateLedger,
  type DynamoRateLedgerOptions,
} from './dynamo-ledger.js';
export {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  LedgerRequestError,
  LedgerUnavailableError,
  type ReceiptProblem,
  ReceiptRejectedError,
  UnknownPermitClassError,
} from './errors.js';
export { SHARE_RETRY_MS } from './operations/index.js';
export type { RegionShare } from './region-share.js';
export { type AdoptShareResult, RegionalRateLedger } from './regional-ledger.js';
export type { RingSnapshot } from './ring-snapshot.js';
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
