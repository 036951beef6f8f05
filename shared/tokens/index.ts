export { DynamoTokenStore } from './dynamo-token-store.js';
export * from './errors.js';
export { type HealthState, health, type SetHealth } from './health.js';
export type { AttemptResult, VendorLogin } from './refresh-attempt.js';
export {
  parseRefreshRequest,
  type RefreshOutcome,
  type RefreshRequest,
  refreshRequestSchema,
} from './refresh-request.js';
export {
  Refresher,
  type RefresherOptions,
  type RunSummary,
  type SetRunAction,
  type SetRunSummary,
} from './refresher.js';
export {
  credentialsCooldownSeconds,
  hardFloorSeconds,
  refreshDue,
  softThresholdSeconds,
  tokenThresholds,
} from './thresholds.js';
export type * from './token-state.js';
export {
  notExpired,
  storedTokenOf,
  tokenIdOf,
  tokenLifetimeSeconds,
  validitySeconds,
  vendorNowMs,
} from './token-state.js';
export type * from './token-store.js';
export {
  type DynamoClockEstimate,
  LOGIN_ROUND_TRIP_ALLOWANCE_MS,
  UNMEASURED_VENDOR_OFFSET_MS,
  type VendorOffsetInterval,
  vendorOffsetOf,
} from './vendor-offset.js';
