/**
 * One rate-limited outcome as the vendor counted it: what a span checker reads to tell whether any span of any
 * window held more than its limit, from the vendor's side rather than the client's.
 */
export interface LoggedRequest {
  /** The answer's X-Request-Id, to join with what a client saw. */
  requestId: string;
  /** Vendor clock (epoch ms) at which it was counted or refused. */
  at: number;
  /** What its quota is counted per: the token's jti, or `user:<username>` (rateLimitScope `user`). */
  quotaKey: string;
  /** Its endpoint family; absent for a request under no family's prefix. */
  family?: string;
  served: boolean;
  /** For a refusal, the limit that refused it: a family's (with its name) or a general one (no family). */
  refusedBy?: { family?: string; limit: number; windowSeconds: number };
}

/** The log behind `recordRequests`, in arrival order; copies out so no caller can change it. */
export class RequestLog {
  #entries: LoggedRequest[] = [];

  add(entry: LoggedRequest): void {
    this.#entries.push(entry);
  }

  entries(): LoggedRequest[] {
    return this.#entries.map((entry) => structuredClone(entry));
  }

  clear(): void {
    this.#entries = [];
  }
}
