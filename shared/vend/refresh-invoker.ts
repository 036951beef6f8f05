import type { RefreshOutcome, RefreshRequest } from '../tokens/refresh-request.js';

export type { RefreshOutcome, RefreshRequest };

/**
 * How the vend function asks for a re-login. It cannot log in itself (it may not read credentials): in AWS
 * this is a synchronous invoke of the refresher function, locally and in tests the refresher in-process.
 * The outcome never carries a token: after CURRENT the caller reads the tokens table again.
 */
export interface RefreshInvoker {
  refresh(request: RefreshRequest, options?: { signal?: AbortSignal }): Promise<RefreshOutcome>;
}

/** The refresher in this process (local mode, tests): the same call the refresher function makes. */
export class InProcessRefreshInvoker implements RefreshInvoker {
  readonly #refresher: { refreshOne(request: RefreshRequest): Promise<RefreshOutcome> };

  constructor(refresher: { refreshOne(request: RefreshRequest): Promise<RefreshOutcome> }) {
    this.#refresher = refresher;
  }

  refresh(request: RefreshRequest): Promise<RefreshOutcome> {
    // No signal: an in-process refresh is shared by every waiter and finishes for the next one even if
    // this caller stopped waiting.
    return this.#refresher.refreshOne(request);
  }
}
