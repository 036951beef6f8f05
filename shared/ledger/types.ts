import type { RateLimitSettings } from '../config/credential-sets.js';
import type { LedgerUsage } from './usage.js';

/** What is left of one limit (general, or of a class) at the time of the answer. */
export interface WindowRemaining {
  limit: number;
  windowSeconds: number;
  remaining: number;
  /** Set for the limits of a named class of resource-intensive endpoints. */
  class?: string;
}

export interface PermitRequest {
  /** The access token's id (a hash of the token, never the token). */
  tokenId: string;
  count: number;
  /** A named class of resource-intensive endpoints (reports, rebalancing): counts against it and the general limits. */
  class?: string;
  limits: RateLimitSettings;
}

export type DenialReason = 'QUOTA' | 'COOLDOWN' | 'VENDOR_CAP';

export type PermitDecision =
  | {
      granted: true;
      count: number;
      /** Ledger time of the grant (epoch ms); give back with this value. */
      grantedAt: number;
      /** The permits may be used for sending until then (epoch ms); not after. */
      validUntil: number;
      remaining: WindowRemaining[];
    }
  | {
      granted: false;
      /** Whole seconds, at least 1: asking again after this long finds room, unless others took it first. */
      retryAfterSeconds: number;
      /** The same wait, exact to the millisecond (at least 1). */
      retryAfterMs: number;
      reason: DenialReason;
      remaining: WindowRemaining[];
    };

export interface GiveBackRequest {
  tokenId: string;
  count: number;
  /** The `grantedAt` of the decision the permits came from. */
  grantedAt: number;
  class?: string;
  limits: RateLimitSettings;
}

/** What a consumer saw on a vendor answer: a 429's Retry-After, or the X-RateLimit-* headers. */
export interface VendorFeedbackReport {
  tokenId: string;
  limits: RateLimitSettings;
  retryAfterSeconds?: number;
  /** X-RateLimit-Limit: picks the configured limit (or class limit) the report is about. */
  limit?: number;
  /** X-RateLimit-Remaining. */
  remaining?: number;
  /** X-RateLimit-Reset, Unix seconds. */
  reset?: number;
}

export interface RateLedger {
  acquire(request: PermitRequest): Promise<PermitDecision>;
  giveBack(request: GiveBackRequest): Promise<void>;
  reportVendorFeedback(report: VendorFeedbackReport): Promise<void>;
  /** A read, no write. */
  remaining(tokenId: string, limits: RateLimitSettings): Promise<WindowRemaining[]>;
  /** A read, no write: granted and left per limit, and the vendor cooldown (for the operator's status). */
  usage?(tokenId: string, limits: RateLimitSettings): Promise<LedgerUsage>;
}
