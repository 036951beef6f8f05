import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { RateLedger } from '../ledger/index.js';
import type { Telemetry } from '../observability.js';
import type { Caller } from './access-policy.js';
import type { VendRequest } from './http-request.js';
import type { QuotaView } from './quota-view.js';
import type { ReportLimiter } from './report-limits.js';
import type { RouteName } from './router.js';
import type { TokenProvider } from './token-provider.js';

/** What the request log line says about one request (never the token). */
export interface Audit {
  route?: RouteName;
  caller?: string;
  consumers?: string[];
  /** The operator rules the caller matched (status only). */
  operators?: string[];
  credentialSet?: string;
  tokenId?: string;
  /** What the broker did, e.g. VENDED, GRANTED, DENIED, RELOGIN_AFTER_REJECTION. */
  decision?: string;
  /** A rate-limit report taught this class something of its limits (docs/class-limits.md). */
  learnedClass?: string;
  /** A rise of that class's limit was adopted (docs/class-limits.md, R3): from and to, over one window. */
  raisedFrom?: number;
  raisedTo?: number;
  raisedWindowSeconds?: number;
  source?: string;
  count?: number;
  /** Give-backs: permits actually taken back. */
  returned?: number;
  /** Rejection reports: the token the consumer said was refused, the vendor's code and request id. */
  rejectedTokenId?: string;
  vendorErrorCode?: string;
  vendorRequestId?: string;
  /** Rate-limit reports: the Retry-After / reset as reported, when the broker capped them (seconds). */
  reportedRetryAfterSeconds?: number;
  reportedReset?: number;
  /** Behind a 5xx: the code (or class name) of the error that caused it. */
  cause?: string;
}

export interface VendServices {
  provider: TokenProvider;
  ledger: RateLedger;
  quota: QuotaView;
  clock: Clock;
  telemetry: Telemetry;
  maxBodyBytes: number;
  /** Rate-limit and rejection reports per caller and per set, and the set's report-driven re-logins. */
  reports: ReportLimiter;
}

/** Everything a route needs: the checked request, the identified caller and the authorised set. */
export interface SetRouteContext {
  request: VendRequest;
  caller: Caller;
  set: CredentialSetConfig;
  audit: Audit;
  services: VendServices;
}
