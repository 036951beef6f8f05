import type { VendorEnvironment } from '../shared/vendor-client/types.js';

export interface LoginCounts {
  attempts: number;
  successes: number;
  failures: number;
}

/** What one quota (the general limits, or an endpoint family's) let through and refused. */
export interface QuotaCounts {
  /** Requests counted in its windows (they passed every limit that applies to them). */
  served: number;
  /** 429s answered. General: those its limits caused. A family: every 429 to its requests, whoever's limit. */
  refused: number;
  /** The refusals by the limit that caused them: `10/60s` (its own), `general 50/60s` (a family's request). */
  refusedByLimit: Record<string, number>;
}

export interface RateLimitCounts {
  /** Every request counts against the general limits, a family's too. */
  general: QuotaCounts;
  /** By family name: its requests only. */
  families: Record<string, QuotaCounts>;
}

export interface SandboxStats {
  environment: VendorEnvironment;
  /** Every POST /restful/login/ received, whatever its answer. */
  loginRequests: number;
  /** By username, when the body named one. */
  logins: Record<string, LoginCounts>;
  /**
   * Every resource request received, by method, counted on arrival (before outage, faults and latency): what
   * reached the vendor, including requests whose answer the client never got.
   */
  resourceRequests: Record<string, number>;
  /** Authenticated resource requests that passed auth and rate limiting, by the token's jti (never the token). */
  requestsByToken: Record<string, number>;
  responsesByStatus: Record<string, number>;
  /** Every errorCode served, RATE_LIMIT_EXCEEDED included. */
  errorsByCode: Record<string, number>;
  /** Rate limiting by quota, for measuring quota use and 429s per endpoint family. */
  rateLimits: RateLimitCounts;
}

const emptyCounts = (): QuotaCounts => ({ served: 0, refused: 0, refusedByLimit: {} });
const copyCounts = (counts: QuotaCounts): QuotaCounts => ({
  ...counts,
  refusedByLimit: { ...counts.refusedByLimit },
});

const bump = (counts: Map<string, number>, key: string): void => {
  counts.set(key, (counts.get(key) ?? 0) + 1);
};

/** Counters of what the sandbox was asked and what it answered. Maps inside, so no key can be `__proto__`. */
export class StatsRecorder {
  readonly #environment: VendorEnvironment;
  #loginRequests = 0;
  #logins = new Map<string, LoginCounts>();
  #resourceRequests = new Map<string, number>();
  #requestsByToken = new Map<string, number>();
  #responsesByStatus = new Map<string, number>();
  #errorsByCode = new Map<string, number>();
  #general = emptyCounts();
  #families = new Map<string, QuotaCounts>();

  constructor(environment: VendorEnvironment) {
    this.#environment = environment;
  }

  loginRequest(): void {
    this.#loginRequests++;
  }

  resourceRequest(method: string): void {
    bump(this.#resourceRequests, method);
  }

  loginOutcome(username: string, success: boolean): void {
    const counts = this.#logins.get(username) ?? { attempts: 0, successes: 0, failures: 0 };
    counts.attempts++;
    if (success) counts.successes++;
    else counts.failures++;
    this.#logins.set(username, counts);
  }

  tokenRequest(jti: string): void {
    bump(this.#requestsByToken, jti);
  }

  /** A request that passed rate limiting, under `family` when it is one's. */
  rateLimitServed(family: string | undefined): void {
    this.#general.served++;
    if (family !== undefined) this.#family(family).served++;
  }

  /**
   * A 429 of the limiter: `byFamily` says whether the family's own limit refused it (else a general one did),
   * `limit` names that limit (`10/60s`).
   */
  rateLimitRefused(family: string | undefined, byFamily: boolean, limit: string): void {
    const bumpIn = (counts: QuotaCounts, key: string) => {
      counts.refused++;
      counts.refusedByLimit[key] = (counts.refusedByLimit[key] ?? 0) + 1;
    };
    if (!byFamily) bumpIn(this.#general, limit);
    if (family !== undefined) bumpIn(this.#family(family), byFamily ? limit : `general ${limit}`);
  }

  #family(name: string): QuotaCounts {
    let counts = this.#families.get(name);
    if (!counts) {
      counts = emptyCounts();
      this.#families.set(name, counts);
    }
    return counts;
  }

  response(status: number, errorCode: string | undefined): void {
    bump(this.#responsesByStatus, String(status));
    if (errorCode !== undefined) bump(this.#errorsByCode, errorCode);
  }

  reset(): void {
    this.#loginRequests = 0;
    this.#logins = new Map();
    this.#resourceRequests = new Map();
    this.#requestsByToken = new Map();
    this.#responsesByStatus = new Map();
    this.#errorsByCode = new Map();
    this.#general = emptyCounts();
    this.#families = new Map();
  }

  snapshot(): SandboxStats {
    return {
      environment: this.#environment,
      loginRequests: this.#loginRequests,
      logins: Object.fromEntries([...this.#logins].map(([user, counts]) => [user, { ...counts }])),
      resourceRequests: Object.fromEntries(this.#resourceRequests),
      requestsByToken: Object.fromEntries(this.#requestsByToken),
      responsesByStatus: Object.fromEntries(this.#responsesByStatus),
      errorsByCode: Object.fromEntries(this.#errorsByCode),
      rateLimits: {
        general: copyCounts(this.#general),
        families: Object.fromEntries([...this.#families].map(([name, counts]) => [name, copyCounts(counts)])),
      },
    };
  }
}
