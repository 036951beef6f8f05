export { DynamoTokenStore } from './dynamo-token-store.js';
export * from './errors.js';
export { health } from './health.js';
export type { RefreshOutcome } from './refresh-request.js';
export { Refresher, type RefresherOptions, type RunSummary } from './refresher.js';
export {
  credentialsCooldownSeconds,
  hardFloorSeconds,
  softThresholdSeconds,
  tokenThresholds,
} from './thresholds.js';
export type * from './token-state.js';
export { tokenIdOf, validitySeconds } from './token-state.js';
export type * from './token-store.js';
export {
  LOGIN_ROUND_TRIP_ALLOWANCE_MS,
  UNMEASURED_VENDOR_OFFSET_MS,
  vendorOffsetOf,
} from './vendor-offset.js';
