import * as z from 'zod';
import type { LambdaInvokeOutput, LambdaInvoker } from '../aws/lambda-invoke.js';
import { lazy } from '../lazy.js';
import type { RefreshInvoker, RefreshOutcome, RefreshRequest } from './refresh-invoker.js';
import { RefresherUnavailableError } from './vend-errors.js';

/**
 * Only these fields are read from the refresher's answer; anything else (even a token, should a bug ever put
 * one there) is dropped by the schema and never reaches a log or a consumer.
 */
const outcomeSchema = lazy(() =>
  z.discriminatedUnion('status', [
    z.object({
      status: z.literal('CURRENT'),
      tokenId: z.string(),
      exp: z.number(),
      loggedIn: z.boolean(),
    }),
    z.object({
      status: z.literal('UNAVAILABLE'),
      errorCode: z.string(),
      retryAfterSeconds: z.number(),
    }),
  ]),
);

/** The refresher function, invoked synchronously (RequestResponse) with `{ action: 'refresh', ...request }`. */
export class LambdaRefreshInvoker implements RefreshInvoker {
  readonly #client: LambdaInvoker;
  readonly #functionName: string;
  readonly #timeoutMs: number;

  /** `timeoutMs` (real time, default 12 s): a refresher that hangs must not hold the vend request forever. */
  constructor(options: { client: LambdaInvoker; functionName: string; timeoutMs?: number }) {
    this.#client = options.client;
    this.#functionName = options.functionName;
    this.#timeoutMs = options.timeoutMs ?? 12_000;
  }

  async refresh(request: RefreshRequest, options: { signal?: AbortSignal } = {}): Promise<RefreshOutcome> {
    const input = {
      functionName: this.#functionName,
      payload: new TextEncoder().encode(JSON.stringify({ action: 'refresh', ...request })),
    };
    let response: LambdaInvokeOutput;
    try {
      const timeout = AbortSignal.timeout(this.#timeoutMs);
      const abortSignal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
      response = await this.#client.invoke(input, { abortSignal });
    } catch (cause) {
      const name = cause instanceof Error ? cause.name : 'unknown';
      throw new RefresherUnavailableError(`invoking the refresher failed (${name})`, { cause });
    }
    const text = new TextDecoder().decode(response.payload);
    if (response.functionError) {
      // The error's type only: its message is the refresher's business, and stays in the refresher's logs.
      const errorType = safeErrorType(text);
      throw new RefresherUnavailableError(`the refresher failed (${response.functionError}: ${errorType})`);
    }
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      throw new RefresherUnavailableError('the refresher answered something that is not JSON');
    }
    const outcome = outcomeSchema().safeParse(payload);
    if (!outcome.success) throw new RefresherUnavailableError('the refresher answered an unknown shape');
    return outcome.data;
  }
}

function safeErrorType(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    const type = (parsed as { errorType?: unknown } | null)?.errorType;
    return typeof type === 'string' && /^[\w.]{1,64}$/.test(type) ? type : 'unknown';
  } catch {
    return 'unknown';
  }
}
