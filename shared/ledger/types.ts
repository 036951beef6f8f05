import type { RateLimitSettings } from '../config/rate-limits.js';
import type { LearnedLimit } from './learned-limits.js';

/** What is left of one limit (general, or of a class) at the time of the answer. */
export interface WindowRemaining {
  limit: number;
  windowSeconds: number;
  remaining: number;
  /** Set for the limits of a named class of resource-intensive endpoints. */
  class?: string;
}

export interface PermitRequest {
  /** The access token's id (a hash of the token, never the token): names the ledger item. */
  tokenId: string;
  /** Who asks (a stable id of the consumer, e.g. its principal): the receipt is bound to it. Default ''. */
  caller?: string;
  /**
   * The caller's consumer name in the configuration (never from the request body): picks its reservations
   * (`rateLimits.reservations`), if it holds any. Absent: the caller shares what reservations leave.
   */
  consumer?: string;
  count: number;
  /** A named class of resource-intensive endpoints (reports, rebalancing): counts against it and the general limits. */
  class?: string;
  limits: RateLimitSettings;
  /** The credential set: what it learned of its learned classes' limits applies (docs/class-limits.md). */
  setId?: string;
}

export type DenialReason = 'QUOTA' | 'COOLDOWN' | 'VENDOR_CAP';

export type PermitDecision =
  | {
      granted: true;
      count: number;
      /** Ledger time of the grant (epoch ms). */
      grantedAt: number;
      /** Opaque and signed: presented to give unused permits of this grant back (once, by the same caller). */
      receipt: string;
      /** The permits may be used for sending until then (epoch ms); not after. */
      validUntil: number;
      remaining: WindowRemaining[];
      /** The most a next grant could give this consumer now (operations/grant.ts availableTo): its reservation and the shared part. */
      available: number;
      /** The most one grant can ever give this consumer (RateLedger.maxCount): a larger count is refused. */
      maxCount: number;
    }
  | {
      granted: false;
      /** Whole seconds, at least 1: asking again after this long finds room, unless others took it first. */
      retryAfterSeconds: number;
      /** The same wait, exact to the millisecond (at least 1). */
      retryAfterMs: number;
      reason: DenialReason;
      remaining: WindowRemaining[];
      /** The most a grant could give this consumer now: an ask this large or smaller may be granted at once. */
      available: number;
      /** The most one grant can ever give this consumer (RateLedger.maxCount): a larger count is refused. */
      maxCount: number;
    };

export interface GiveBackRequest {
  tokenId: string;
  /** The same caller the grant was made for (default ''). */
  caller?: string;
  /** The receipt of the grant the permits came from. */
  receipt: string;
  /** How many of the grant's permits come back: at most what it gave; the receipt is spent either way. */
  count: number;
  limits: RateLimitSettings;
  setId?: string;
}

/**
 * Why a give-back was not recorded (operations/give-back.ts, spentPlaceFor): the caller's share of the item's spent
 * receipt ids is taken (CALLER_SHARE), or they are full of other callers' (LEDGER_BUSY).
 */
export type NotRecordedReason = 'CALLER_SHARE' | 'LEDGER_BUSY';

/**
 * What a give-back did: permits taken out of the ledger (0 when the grant's slot had already aged out). With
 * `notRecorded`: nothing changed and 0 came back; the receipt is not spent, and its permits age out.
 */
export interface GiveBackResult {
  returned: number;
  notRecorded?: NotRecordedReason;
}

/** What a consumer saw on a vendor answer: a 429's Retry-After, or the X-RateLimit-* headers. */
export interface VendorFeedbackReport {
  tokenId: string;
  /**
   * Who reports (a stable id of the consumer, e.g. its principal; default ''): a Retry-After beyond what the
   * report warrants alone holds the set only once a different caller reports as much (vendor-feedback.ts).
   */
  caller?: string;
  limits: RateLimitSettings;
  retryAfterSeconds?: number;
  /** X-RateLimit-Limit: picks the configured limit (or class limit) the report is about. */
  limit?: number;
  /** X-RateLimit-Remaining. */
  remaining?: number;
  /** X-RateLimit-Reset, Unix seconds. */
  reset?: number;
  /** The configured class of the answer the headers came on: they may teach its limit (learned-limits.ts). */
  class?: string;
  /** The credential set, whose learned limits a class report may teach. */
  setId?: string;
  /**
   * The vendor's clock minus the ledger's (DynamoDB's), in ms, somewhere in [lo, hi]: the reported token's, as
   * measured at its login (shared/tokens/vendor-offset.ts, vendorOffsetOf), for reading `reset`, a time on the
   * vendor's clock. Set by the vend API, never by a consumer; absent from other callers and earlier releases
   * (then the ledger's own clock: docs/class-limits.md, C1-C3).
   * Checked by validation.ts (checkFeedback): finite, lo ≤ hi, within ±MAX_VENDOR_OFFSET_MS.
   */
  vendorOffsetMs?: { lo: number; hi: number };
}

/**
 * What a class report taught: the class's learned limits after it (`changed`: it changed what the set learned),
 * and a limit a rise adopted (`raised`, R3).
 */
export interface VendorFeedbackResult {
  learned?: {
    class: string;
    limits: LearnedLimit[];
    changed: boolean;
    raised?: { from: { limit: number; windowSeconds: number }; to: { limit: number; windowSeconds: number } };
  };
}

export interface RateLedger {
  acquire(request: PermitRequest): Promise<PermitDecision>;
  /**
   * The most one grant can ever give this consumer (a larger count is refused, InvalidPermitCountError), on the
   * plan its permits are decided on: for a count checked before anything else is (the vend API's 400).
   */
  maxCount(request: Pick<PermitRequest, 'limits' | 'setId' | 'class' | 'consumer'>): Promise<number>;
  /** Throws ReceiptRejectedError (nothing changed) for a forged, foreign, spent or expired receipt. */
  giveBack(request: GiveBackRequest): Promise<GiveBackResult>;
  reportVendorFeedback(report: VendorFeedbackReport): Promise<VendorFeedbackResult | undefined>;
  /** A read, no write. */
  remaining(tokenId: string, limits: RateLimitSettings, setId?: string): Promise<WindowRemaining[]>;
  /** A read, no write: granted and left per limit, and the vendor cooldown (for the operator's status). */
  usage?(tokenId: string, limits: RateLimitSettings, setId?: string): Promise<LedgerUsage>;
  /**
   * What the set learned of its classes' limits (in force now; the operator's status). With the set's `limits`,
   * a kept limit under a rise trial also says so (`trial`); without them, as before.
   */
  learned?(setId: string, limits?: RateLimitSettings): Promise<Record<string, LearnedLimitStatus[]>>;
}

/** A kept limit's rise under trial (docs/class-limits.md, R2-R3), for the operator's status. */
export interface LimitTrial {
  /** What the class is held to meanwhile, per the kept limit's window (R2: a learned class's). */
  limit: number;
  /** The least larger limit the callers reported (R1): kept in place of the kept one when the trial passes (R3). */
  reportedLimit: number;
  /** Ledger time (epoch ms) the trial began. */
  since: number;
}

/** A learned limit as the operator's status shows it: with its rise trial, while one is under way. */
export type LearnedLimitStatus = LearnedLimit & { trial?: LimitTrial };

/**
 * One part of a general window with reservations (ReservedWindow in limit-plan.ts): a consumer's reservation,
 * or the shared part the reservations leave. `used`: granted from this part in the window (plus the margin);
 * `remaining`: what it could still give now (0 during a cooldown, lowered by the vendor's general caps).
 */
export interface PartUsage {
  limit: number;
  used: number;
  remaining: number;
}

/** A reserved consumer's part of a window: its `name` in the configuration, and its use of its reservation. */
export interface ReservationUsage extends PartUsage {
  consumer: string;
}

/** One limit as the operator sees it: what was granted in the window (plus the margin), and what is left. */
export interface WindowUsage extends WindowRemaining {
  used: number;
  /** Only on a general window with reservations: what they leave shared (limit = limit − Σ reservations). */
  shared?: PartUsage;
  /** Only on a general window with reservations: each reserved consumer's part, in configuration order. */
  reservations?: ReservationUsage[];
}

/** What a token's ledger says, for the operator: usage per limit and the vendor's cooldown, if one is on. */
export interface LedgerUsage {
  windows: WindowUsage[];
  /** Epoch ms: a vendor 429's Retry-After reported by a consumer; no permit for anyone before it. */
  cooldownUntil?: number;
}
