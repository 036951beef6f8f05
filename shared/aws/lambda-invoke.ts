import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';

/** What an invoke answers: the function's payload, and its error kind when it threw (`Unhandled`). */
export interface LambdaInvokeOutput {
  statusCode: number;
  functionError?: string;
  payload: Uint8Array;
}

/** A synchronous (RequestResponse) invoke of a Lambda function. */
export interface LambdaInvoker {
  invoke(
    input: { functionName: string; payload: Uint8Array },
    options?: { abortSignal?: AbortSignal },
  ): Promise<LambdaInvokeOutput>;
}

/** The Lambda service refused the invoke (throttled, not found, not allowed…): its status and error type. */
export class LambdaInvokeError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
  ) {
    super(`Lambda Invoke answered ${status} (${errorType})`);
    this.name = 'LambdaInvokeError';
  }
}

type Credentials = ConstructorParameters<typeof SignatureV4>[0]['credentials'];

/** Lambda's regional endpoint (the China partition has its own domain), unless one is configured. */
export function lambdaEndpoint(region: string, configured?: string): string {
  if (configured) return configured;
  return `https://lambda.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

/**
 * Lambda's Invoke API over fetch, signed with SigV4 (the credentials of the default chain: the function role's
 * in Lambda). This is all the vend function needs of Lambda; @aws-sdk/client-lambda brought the schemas of
 * every other operation into its bundle (about 70 KiB). Throttles, 5xx and lost connections are tried again
 * once (as the SDK client with maxAttempts 2 did); an abort is not.
 */
export class SignedLambdaInvoker implements LambdaInvoker {
  readonly #endpoint: string;
  readonly #signer: SignatureV4;
  readonly #maxAttempts: number;

  constructor(options: {
    region: string;
    endpoint?: string;
    credentials?: Credentials;
    maxAttempts?: number;
  }) {
    this.#endpoint = lambdaEndpoint(options.region, options.endpoint);
    this.#signer = new SignatureV4({
      service: 'lambda',
      region: options.region,
      credentials: options.credentials ?? defaultProvider(),
      // Node's own SHA-256, the one the SDK clients in the bundle sign with (not a second, JavaScript one).
      sha256: Sha256,
    });
    this.#maxAttempts = options.maxAttempts ?? 2;
  }

  async invoke(
    input: { functionName: string; payload: Uint8Array },
    options: { abortSignal?: AbortSignal } = {},
  ): Promise<LambdaInvokeOutput> {
    const url = new URL(
      `/2015-03-31/functions/${encodeURIComponent(input.functionName)}/invocations`,
      this.#endpoint,
    );
    for (let attempt = 1; ; attempt++) {
      const signed = await this.#signer.sign({
        method: 'POST',
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port ? { port: Number(url.port) } : {}),
        path: url.pathname,
        query: {},
        headers: {
          host: url.host,
          'content-type': 'application/json',
          'x-amz-invocation-type': 'RequestResponse',
        },
        body: input.payload,
      });
      // fetch sets Host itself (the same value that was signed).
      const { host: _host, ...headers } = signed.headers;
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers,
          body: input.payload,
          ...(options.abortSignal ? { signal: options.abortSignal } : {}),
        });
      } catch (error) {
        if (options.abortSignal?.aborted || attempt >= this.#maxAttempts) throw error;
        continue;
      }
      const payload = new Uint8Array(await response.arrayBuffer());
      if (response.ok) {
        const functionError = response.headers.get('x-amz-function-error');
        return { statusCode: response.status, payload, ...(functionError ? { functionError } : {}) };
      }
      if ((response.status === 429 || response.status >= 500) && attempt < this.#maxAttempts) continue;
      const errorType = response.headers.get('x-amzn-errortype')?.split(':')[0] || 'unknown';
      throw new LambdaInvokeError(response.status, errorType);
    }
  }
}
