/**
 * @token-broker/client (built by packaging/build.ts): the consumer library for internal services. One
 * BrokerClient per process talks to the broker's vend API (SigV4-signed, default AWS credential chain) and,
 * with its tokens and permits, to the vendor.
 */

// Clock, Telemetry and RetrySettings: the types BrokerClientOptions names, so a service can implement them.
export type { Clock } from '../shared/clock.js';
// Every error class the client can throw (test/client-exports.test.ts checks it against the bundle): the base
// of them all, the configuration's, and the vendor's typed errors that vendorRequest throws for final answers.
export { BrokerError, ConfigurationError } from '../shared/errors.js';
export {
  type PowertoolsLoggerLike,
  type PowertoolsMetricsLike,
  powertoolsTelemetry,
} from '../shared/powertools-telemetry.js';
export type { LogAttributes, MetricUnitValue, Telemetry } from '../shared/telemetry.js';
export {
  InsecureVendorUrlError,
  InvalidResourcePathError,
  InvalidVendorRequestError,
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorCallAbortedError,
  VendorError,
  VendorRateLimitError,
  VendorTimeoutError,
  VendorTokenUnusableError,
  VendorUnreachableError,
} from '../shared/vendor-client/errors.js';
export type { RetrySettings } from '../shared/vendor-client/retry.js';
export type { HttpMethod, RateLimitHeaders, ResourceResponse } from '../shared/vendor-client/types.js';
export { BrokerClient, type BrokerClientApi } from './broker-client.js';
export {
  BrokerApiError,
  BrokerUnreachableError,
  ClientClosedError,
  InvalidClientRequestError,
  PermitDeadlineError,
  RequestAbortedError,
} from './errors.js';
// A value, not only a type: FakeBrokerClient (./testing.ts, the package's `/testing`) hands out real handles.
export { PermitHandle, type PermitSettlement } from './permit-handle.js';
export type { AwsCredentialIdentity, CredentialsProvider } from './sigv4.js';
export type {
  AcquirePermitOptions,
  BrokerClientOptions,
  CredentialSetSummary,
  ForcedRefresh,
  GetTokenOptions,
  Permit,
  PermitPriority,
  QuotaWindow,
  RateLimitReportResult,
  ReportRateLimitOptions,
  RequestClass,
  TokenRejection,
  VendedToken,
  VendorAnswer,
  VendorRequestOptions,
} from './types.js';
