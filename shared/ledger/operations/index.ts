/**
 * The ledger's operations, side by side: each a pure function `(state, input, at) -> { change, outcome }` of a
 * working copy of the item's state (the write loop, item/write-loop.ts, hands every attempt a fresh one), tested
 * without a database (test/operations.test.ts). The ledger (dynamo-ledger.ts) builds each input, hands the
 * operation to the write loop and turns its outcome (outcome.ts) into its answer.
 */
export { countDenied, NO_PENDING_ASKS } from './denied-asks.js';
export { type GiveBackInput, giveBack } from './give-back.js';
export {
  checkClass,
  checkPermit,
  checkTokenId,
  type GrantInput,
  grant,
  heldBy,
  SHARE_RETRY_MS,
  shareLapsed,
} from './grant.js';
export { type LearningInput, learn } from './learning.js';
export type { Applied, Outcome } from './outcome.js';
export { adoptShare } from './share-adoption.js';
export { vendorReport } from './vendor-report.js';
