/** Types of the vendor's Portfolio Management Service API (../shared/vendor-api.md). */
import type { RetrySettings } from './retry-settings.js';

export const VENDOR_ENVIRONMENTS = ['uat', 'prod'] as const;
export type VendorEnvironment = (typeof VENDOR_ENVIRONMENTS)[number];

export interface VendorCredentials {
  username: string;
  password: string;
}

/** The login result of vendor-api.md §2, with the expiry the broker computed from it. */
export interface LoginResult {
  userDetails: { username: string; userKey: string; groups: number[] };
  roles: string[];
  accessToken: string;
  /** Returned by the vendor but never usable: the vendor does not support refresh (§5). */
  refreshToken?: string;
  executionPlatformKey: string;
  tenant: string;
  defaultCompanyInventorySource: string;
  status: string;
  companyKey: string;
  /** Effective expiry, Unix seconds: the earlier of the body's `exp` and the JWT's `exp` claim. */
  exp: number;
  /** The JWT's `env` claim, when present. */
  env?: string;
  /** The JWT's `iat` claim, when present (Unix seconds). */
  issuedAt?: number;
  /** The vendor's clock from the response `Date` header (epoch ms, whole seconds), for skew measurement. */
  vendorDate?: number;
  /**
   * Our clock (epoch ms) when the request this answer came to was sent: the vendor stamped its `Date` after it,
   * which bounds how far ahead the vendor's clock can be (token-check.ts).
   */
  requestSentAt?: number;
  /** The vendor's request id from the response headers, when it sent one. */
  requestId?: string;
}

/** The `X-RateLimit-*` and `Retry-After` headers of one vendor answer (§8). */
export interface RateLimitHeaders {
  limit?: number;
  remaining?: number;
  /** Unix seconds. */
  reset?: number;
  retryAfterSeconds?: number;
}

export type HttpMethod = 'GET' | 'PUT' | 'POST' | 'DELETE';

export interface ResourceResponse<T = unknown> {
  status: number;
  body: T;
  rateLimit: RateLimitHeaders;
  requestId?: string;
}

/** One resource call (vendor-api.md §4). `path` must be `/users/<number>/<tenant>/serviceKey/<key>`. */
export interface ResourceRequest {
  method: HttpMethod;
  path: string;
  /**
   * The path matched a pattern of a request class configured for the credential set: any safe path is sent
   * (isSafeVendorPath), not only the documented resource shape.
   */
  ofClass?: boolean;
  /** The access token, sent as `Authorization: Bearer <token>`. */
  token: string;
  /** Serialised as JSON. Not allowed on GET. */
  body?: unknown;
  signal?: AbortSignal;
  /** `false`: one attempt only (for callers that retry themselves, token-aware); or overrides. */
  retry?: false | Partial<RetrySettings>;
}
