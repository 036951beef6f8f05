import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';

/** AWS credentials, or a provider of them (the default chain: env, SSO, profile, container, instance). */
export interface AwsCredentialIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}
export type CredentialsProvider = () => Promise<AwsCredentialIdentity>;

export interface SignedRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/**
 * Signs a request for a Lambda Function URL with IAM auth (service `lambda`), exactly as AWS verifies it.
 * The local broker verifies the same signature, so one client works locally and in AWS.
 */
export class FunctionUrlSigner {
  readonly #signer: SignatureV4;

  constructor(options: { region: string; credentials: AwsCredentialIdentity | CredentialsProvider }) {
    this.#signer = new SignatureV4({
      service: 'lambda',
      region: options.region,
      credentials: options.credentials,
      sha256: Sha256,
    });
  }

  async sign(
    request: { url: string; method: string; headers?: Record<string, string>; body?: string },
    signingDate?: Date,
  ): Promise<SignedRequest> {
    const url = new URL(request.url);
    const query: Record<string, string | string[]> = {};
    for (const [key, value] of url.searchParams) {
      const existing = query[key];
      query[key] =
        existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
    }
    const headers: Record<string, string> = { host: url.host };
    for (const [key, value] of Object.entries(request.headers ?? {})) headers[key.toLowerCase()] = value;
    const signed = await this.#signer.sign(
      {
        method: request.method.toUpperCase(),
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port ? { port: Number(url.port) } : {}),
        path: url.pathname,
        query,
        headers,
        ...(request.body !== undefined ? { body: request.body } : {}),
      },
      signingDate ? { signingDate } : {},
    );
    const { host: _host, ...sendHeaders } = signed.headers as Record<string, string>;
    return {
      url: request.url,
      method: request.method.toUpperCase(),
      headers: sendHeaders,
      ...(request.body !== undefined ? { body: request.body } : {}),
    };
  }
}
