import type { Clock } from '../shared/clock.js';
import type { Telemetry } from '../shared/telemetry.js';
import type { RetrySettings } from '../shared/vendor-client/retry.js';
import type { HttpMethod } from '../shared/vendor-client/types.js';
import type { AwsCredentialIdentity, CredentialsProvider } from './sigv4.js';

/** What is left of one limit of a token's quota, as the broker's ledger last said. */
export interface QuotaWindow {
  limit: number;
  windowSeconds: number;
  remaining: number;
  /** Set for the limits of a named class of resource-intensive endpoints. */
  class?: string;
}

/** A request class of the credential set and the path patterns of its requests (`[]`: named by callers). */
export interface RequestClass {
  class: string;
  /** `*` matches exactly one segment, `**` (only last) one or more, any other segment itself. */
  paths: readonly string[];
  /**
   * Its limits are learned from the vendor's answers (configured with none): the client reports their
   * X-RateLimit-* once per vendor window to keep them in force. False from brokers that do not say.
   */
  learned: boolean;
}

/**
 * A credential set's token as the broker vended it. `accessToken` is a non-enumerable property: logging or
 * serialising the object (console.log, JSON.stringify, a spread) never shows it. Use `tokenId` in logs.
 */
export interface VendedToken {
  readonly credentialSet: string;
  readonly environment: string;
  readonly accessToken: string;
  /** First 16 hex of sha256(accessToken). */
  readonly tokenId: string;
  /** Unix seconds (the vendor's `exp`). */
  readonly expiresAt: number;
  /** As the broker counted it when answering. */
  readonly expiresInSeconds: number;
  readonly tenant: string;
  readonly companyKey: string;
  readonly executionPlatformKey: string;
  readonly userKey: string;
  /** The token's quota when vended; null when the broker's ledger could not say. */
  readonly quota: readonly QuotaWindow[] | null;
  /** Where to send vendor calls, when the broker says it. */
  readonly vendorBaseUrl: string | undefined;
  /**
   * The set's request classes in configuration order, by which vendorRequest classifies a request's path;
   * undefined from brokers before request classes by path (then only a request's `class` names one).
   */
  readonly classes: readonly RequestClass[] | undefined;
  /** Epoch ms on this client's clock when it arrived. */
  readonly receivedAt: number;
  /**
   * Epoch ms on this client's clock from which the token is expired: the earlier of `expiresAt` and
   * `receivedAt + expiresInSeconds`, so a client clock that is behind the broker's does not overrun it.
   */
  readonly expiresAtMs: number;
}

export interface CredentialSetSummary {
  id: string;
  environment: string;
  companyRole: string;
  health: {
    state: string;
    /** Unix seconds of the current token's expiry, null when there is none. */
    expiresAt: number | null;
    lastError: { code: string; at: string; requestId?: string } | null;
  };
}

/** One permit to send one vendor request with the token `tokenId`. Send it right away. */
export interface Permit {
  credentialSet: string;
  tokenId: string;
  class?: string;
  /** Ledger time of the grant (epoch ms). */
  grantedAt: number;
  /** The ledger's limit for sending (epoch ms); the client hands out permits only well before it. */
  validUntil: number;
}

export interface GetTokenOptions {
  /** At least this many seconds of validity (default and floor 300, the vendor's 5-minute rule). */
  minValiditySeconds?: number;
  /** Ask the broker even when the cached token would do. */
  forceRefresh?: boolean;
  signal?: AbortSignal;
}

/**
 * Which of this process's waiting calls is served first when permits are scarce: every waiting `interactive`
 * call before any waiting `batch` call, first come first served within each. Local to the BrokerClient (one
 * process): the broker never hears of it, and it is not a rate `class`.
 */
export type PermitPriority = 'interactive' | 'batch';

export interface AcquirePermitOptions {
  /** A named class of resource-intensive endpoints, as configured for the credential set. */
  class?: string;
  /**
   * Default `interactive`. A `batch` caller never takes a permit while an `interactive` one of this client
   * waits for the same set, token and class; it is served in turn once none does.
   */
  priority?: PermitPriority;
  signal?: AbortSignal;
  /** How long to wait for room in the quota (default: the client's `maxPermitWaitMs`). */
  maxWaitMs?: number;
}

export interface VendorRequestOptions {
  method: HttpMethod;
  /**
   * `/users/<number>/<tenant>/serviceKey/<key>`, or a path of one of the set's request classes (any shape that
   * matches a class pattern, with segments of letters, digits, `. _ ~ -`); a function gets the token (for its
   * `tenant`).
   */
  path: string | ((token: VendedToken) => string);
  body?: unknown;
  /**
   * Not needed where the set's class patterns cover the path: the request is of the first class with a pattern
   * its path matches (the path decides over a class named here, with a warning). Name it for a path of a
   * resource-intensive endpoint that no pattern covers.
   */
  class?: string;
  /** For each permit the request takes (its retries too): default `interactive`; see AcquirePermitOptions. */
  priority?: PermitPriority;
  signal?: AbortSignal;
  /** How long each permit may be waited for (default: the client's `maxPermitWaitMs`). */
  maxPermitWaitMs?: number;
  /**
   * Whether the request may be sent twice without harm. Default: by its method (GET, PUT, DELETE yes; POST
   * no). A request that is not idempotent is re-sent only where the vendor cannot have acted on it: a 429, a
   * 503 in the vendor's own error shape (its documented "temporary outage"), a 401 TOKEN_EXPIRED or
   * TOKEN_INVALID, or a connection that failed before the request was written (DNS, connection refused).
   * After a timeout, a connection reset, a 500/502/504 or a proxy's 503 page it is not re-sent: the vendor
   * may have carried it out, and a second one would be a duplicate (or a false 409 DUPLICATE_KEY); the error
   * is thrown as it was. Set `true` for a POST the vendor can safely see twice (say, one whose key makes a
   * repeat a 409 the caller handles) to have it retried like a GET; `false` makes a PUT or DELETE as careful
   * as a POST.
   */
  idempotent?: boolean;
}

export interface BrokerClientOptions {
  /** The vend Function URL (https://…; plain http:// only for loopback, the local broker). */
  brokerUrl: string;
  /** For SigV4; default: from a `*.lambda-url.<region>.on.aws` URL, else AWS_REGION, else AWS_DEFAULT_REGION. */
  region?: string;
  /** Default: the AWS SDK's default credential chain (env, SSO, web identity, profile, container, instance). */
  credentials?: AwsCredentialIdentity | CredentialsProvider;
  clock?: Clock;
  /** Used for the broker and the vendor. */
  fetch?: typeof fetch;
  telemetry?: Telemetry;
  /** The vendor base URL per credential set, used when the token answer does not name one. */
  vendorBaseUrls?: Record<string, string>;
  /** Per broker call, real time (default 15000: the broker may wait up to 10 s for a re-login). */
  brokerTimeoutMs?: number;
  /** Per vendor call attempt, real time (default 10000). */
  vendorTimeoutMs?: number;
  /**
   * A cached token is used until `expiresAt − max(minValiditySeconds, validityFloorSeconds) − this − spread`
   * (default 60), `spread` drawn once per client (see `tokenSwitchSpreadSeconds`).
   */
  tokenMarginSeconds?: number;
  /**
   * Upper bound of a random extra lead, drawn once per client in [0, this] from `retry.random`, by which the
   * client leaves a token earlier than the margin says: processes holding the same token ask the broker for
   * its successor spread over this span instead of all in the same second. It only ever shortens a token's
   * use, never below its floor. Default: `tokenMarginSeconds`; 0 turns it off.
   */
  tokenSwitchSpreadSeconds?: number;
  /**
   * The least validity a token is used with: the vendor's 5-minute rule (default 300). Lower it only where
   * the vendor's lifetimes are compressed (the local broker with TIME_SCALE, the soak).
   */
  validityFloorSeconds?: number;
  /** Largest permit batch (default 8). */
  maxBatchSize?: number;
  /** A permit is handed out only while at least this much of its validity is left (default 500 ms). */
  permitSafetyMs?: number;
  /** How long a permit is waited for by default (default 60000, on the clock). */
  maxPermitWaitMs?: number;
  /**
   * The vendor request loop: attempts and backoff for 5xx and 429 (default 4 attempts, 60 s budget).
   * `random` also draws the token switch-over spread and the jitter added to a 429's Retry-After.
   */
  retry?: Partial<RetrySettings>;
  userAgent?: string;
}

/**
 * A vendor answer a service got by calling the vendor itself, as `reportRateLimit` reads it: a fetch
 * `Response` is one; so is `{ status, headers }` from another HTTP library (header names in any case).
 */
export interface VendorAnswer {
  status: number;
  headers: Headers | Readonly<Record<string, string | readonly string[] | undefined>>;
}

export interface ReportRateLimitOptions {
  /** The rate `class` the call was made in (its permit's), for a 2xx's X-RateLimit-* headers. */
  class?: string;
}

/** What `reportRateLimit` did. */
export interface RateLimitReportResult {
  /**
   * True when the broker took a report: every 429; a 2xx when its X-RateLimit-* headers show fewer requests
   * left than the ledger last said, or, of a `class`, are the first of their vendor window while the ledger has
   * no window of the class with their limit or the class is learned. False when there was nothing to report
   * (another status, or headers in line with the ledger) or the report failed (a warning through telemetry).
   */
  reported: boolean;
}

/** A vendor 401 to a call a service made itself with the token `tokenId`, for `reportRejection`. */
export interface TokenRejection {
  tokenId: string;
  /** The vendor's `errorCode`: only these two mean the token itself was refused. */
  errorCode: 'TOKEN_EXPIRED' | 'TOKEN_INVALID';
  /** The vendor's request id (its `X-Request-Id` or the body's `requestId`), for the broker's audit line. */
  requestId?: string;
}

/** A forced re-login's answer (`BrokerClient.forceRefresh`, operators only): the new token by id, never the token. */
export interface ForcedRefresh {
  credentialSet: string;
  environment: string;
  tokenId: string;
  /** The new token's `exp`, Unix seconds. */
  expiresAt: number;
  /** On the vendor's clock as measured at login. */
  expiresInSeconds: number;
  /** This request's login made the token; false when another one (a concurrent refresh, the schedule) did. */
  loggedIn: boolean;
  /** When the broker received the token: ISO 8601. */
  refreshedAt?: string;
  /** The token it replaced, when there was a usable one. */
  replacedTokenId?: string;
}
