export {
  DynamoRateLedger,
  type DynamoRateLedgerOptions,
} from './dynamo-ledger.js';
export {
  InvalidLedgerRequestError,
  InvalidPermitCountError,
  LedgerUnavailableError,
  ReceiptRejectedError,
} from './errors.js';
export { SHARE_RETRY_MS } from './operations/index.js';
export type { RegionShare } from './region-share.js';
export { type AdoptShareResult, RegionalRateLedger } from './regional-ledger.js';
export type { RingSnapshot } from './ring-snapshot.js';
export type {
  GiveBackResult,
  LedgerUsage,
  PermitDecision,
  PermitRequest,
  RateLedger,
  VendorFeedbackReport,
  WindowRemaining,
} from './types.js';
