/**
 * @token-broker/client (built by packaging/build.ts): the consumer library for internal services. One
 * BrokerClient per process talks to the broker's vend API (SigV4-signed, default AWS credential chain) and,
 * with its tokens and permits, to the vendor.
 */

// Clock, Telemetry and RetrySettings: the types BrokerClientOptions names, so a service can implement them.
export type { Clock } from '../shared/clock.js';
export type { LogAttributes, MetricUnitValue, Telemetry } from '../shared/telemetry.js';
// The vendor's typed errors that vendorRequest throws for final answers, so callers switch on them.
export {
  InvalidResourcePathError,
  UnexpectedVendorResponseError,
  VendorApiError,
  VendorCallAbortedError,
  VendorError,
  VendorRateLimitError,
  VendorTimeoutError,
  VendorUnreachableError,
} from '../shared/vendor-client/errors.js';
export type { RetrySettings } from '../shared/vendor-client/retry.js';
export type { HttpMethod, RateLimitHeaders, ResourceResponse } from '../shared/vendor-client/types.js';
export { BrokerClient } from './broker-client.js';
export {
  BrokerApiError,
  BrokerUnreachableError,
  ClientClosedError,
  InvalidClientRequestError,
  PermitDeadlineError,
  RequestAbortedError,
} from './errors.js';
export type { AwsCredentialIdentity, CredentialsProvider } from './sigv4.js';
export type {
  AcquirePermitOptions,
  BrokerClientOptions,
  CredentialSetSummary,
  GetTokenOptions,
  Permit,
  PermitPriority,
  QuotaWindow,
  RequestClass,
  VendedToken,
  VendorRequestOptions,
} from './types.js';
