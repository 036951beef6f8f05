import type { VendorEnvironment } from '../shared/vendor-client/types.js';

export interface LoginCounts {
  attempts: number;
  successes: number;
  failures: number;
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
}

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
    };
  }
}
