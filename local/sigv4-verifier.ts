import { createHash, timingSafeEqual } from 'node:crypto';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import type { Clock } from '../shared/clock.js';
import { requestUrl } from './request-target.js';

/** A local caller: an access key pair standing for an IAM principal, as AWS would resolve it. */
export interface LocalCaller {
  accessKeyId: string;
  secretAccessKey: string;
  principalArn: string;
}

export interface IncomingSignedRequest {
  method: string;
  /** Path and query as received, e.g. `/v1/credential-sets?x=1`. */
  pathWithQuery: string;
  /** Lower-case header names. */
  headers: Record<string, string | undefined>;
  body: string;
}

export type RefusalReason =
  | 'MISSING_SIGNATURE'
  | 'MALFORMED_SIGNATURE'
  | 'WRONG_REGION'
  | 'WRONG_SERVICE'
  | 'UNKNOWN_ACCESS_KEY'
  | 'STALE_REQUEST'
  | 'BODY_HASH_MISMATCH'
  | 'BAD_SIGNATURE';

/**
 * A refusal says why in `detail`, for the local broker's log (a real Function URL says only "Forbidden", and so
 * does the local one to the caller): never a secret key or a signature, at most the access key id, which is
 * not a secret (AWS's own logs show it).
 */
export type VerifyResult =
  | { ok: true; caller: LocalCaller }
  | { ok: false; reason: RefusalReason; detail: string };

const refuse = (reason: RefusalReason, detail: string): VerifyResult => ({ ok: false, reason, detail });
/** An access key id as a log may show it: the id's own characters only, and not too many. */
const shownKey = (accessKeyId: string): string => accessKeyId.replace(/[^A-Z0-9]/g, '').slice(0, 32);

const AUTH_PATTERN =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;_-]+),\s*Signature=([0-9a-f]{64})$/;
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
/** AWS refuses signatures more than 5 minutes off its clock. */
const MAX_SKEW_MS = 5 * 60 * 1000;

/**
 * Verifies an AWS Signature Version 4 the way a Function URL with IAM auth does: recompute the signature over
 * the signed headers with the caller's secret key, compare in constant time, and refuse stale dates.
 */
export class SigV4Verifier {
  readonly #callers: Map<string, LocalCaller>;
  readonly #clock: Clock;
  readonly #region: string;

  constructor(options: { callers: readonly LocalCaller[]; clock: Clock; region: string }) {
    this.#callers = new Map(options.callers.map((caller) => [caller.accessKeyId, caller]));
    this.#clock = options.clock;
    this.#region = options.region;
  }

  async verify(request: IncomingSignedRequest): Promise<VerifyResult> {
    const authorization = request.headers.authorization;
    if (!authorization)
      return refuse(
        'MISSING_SIGNATURE',
        'no Authorization header: the request is not signed (SigV4, service "lambda"; curl: --aws-sigv4 "aws:amz:local:lambda" --user KEY:SECRET)',
      );
    const match = AUTH_PATTERN.exec(authorization.trim());
    const amzDate = request.headers['x-amz-date'];
    const dateParts = amzDate ? AMZ_DATE.exec(amzDate) : null;
    if (!match)
      return refuse('MALFORMED_SIGNATURE', 'the Authorization header is not an AWS4-HMAC-SHA256 signature');
    if (!dateParts) return refuse('MALFORMED_SIGNATURE', 'no X-Amz-Date header of the form 20261129T120000Z');
    const [, accessKeyId, scopeDate, region, service, signedHeaderList, signature] =
      match as unknown as string[];
    if (region !== this.#region)
      return refuse(
        'WRONG_REGION',
        `signed for Region "${shownName(region)}"; this broker's is "${this.#region}" (AWS_REGION=${this.#region}, or --region ${this.#region})`,
      );
    if (service !== 'lambda')
      return refuse(
        'WRONG_SERVICE',
        `signed for service "${shownName(service)}"; a Function URL's is "lambda"`,
      );
    if (!amzDate?.startsWith(scopeDate ?? ''))
      return refuse('MALFORMED_SIGNATURE', "the credential scope's date is not the X-Amz-Date's day");
    const caller = this.#callers.get(accessKeyId ?? '');
    if (!caller)
      return refuse(
        'UNKNOWN_ACCESS_KEY',
        `access key ${shownKey(accessKeyId ?? '')} is none of the local callers' ("callers" of the broker's configuration)`,
      );

    const [, y, mo, d, h, mi, s] = dateParts.map(Number) as number[];
    const signingDate = new Date(Date.UTC(y ?? 0, (mo ?? 1) - 1, d, h, mi, s));
    const skewMs = this.#clock.now() - signingDate.getTime();
    if (Math.abs(skewMs) > MAX_SKEW_MS)
      return refuse(
        'STALE_REQUEST',
        `signed at ${signingDate.toISOString()}, ${Math.round(Math.abs(skewMs) / 1000)} s ${skewMs > 0 ? 'behind' : 'ahead of'} this broker's clock (at most 5 minutes either way)`,
      );

    const signedHeaders = (signedHeaderList ?? '').split(';');
    if (!signedHeaders.includes('host'))
      return refuse('MALFORMED_SIGNATURE', 'the signed headers do not include host');
    const headers: Record<string, string> = {};
    for (const name of signedHeaders) {
      const value = request.headers[name];
      if (value === undefined)
        return refuse('BAD_SIGNATURE', `the signed header ${name.slice(0, 64)} is not in the request`);
      headers[name] = value;
    }
    // The signature covers this header, not the body: the body must hash to it (AWS checks the same).
    const payloadHash = headers['x-amz-content-sha256'];
    if (
      payloadHash !== undefined &&
      payloadHash !== createHash('sha256').update(request.body).digest('hex')
    ) {
      return refuse(
        'BODY_HASH_MISMATCH',
        'the body does not hash to its x-amz-content-sha256: it changed after signing',
      );
    }
    const url = requestUrl(request.pathWithQuery);
    if (!url) return refuse('MALFORMED_SIGNATURE', 'the request target is not a path');
    const query: Record<string, string | string[]> = {};
    for (const [key, value] of url.searchParams) {
      const existing = query[key];
      query[key] =
        existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
    }
    const signer = new SignatureV4({
      service: 'lambda',
      region: this.#region,
      credentials: { accessKeyId: caller.accessKeyId, secretAccessKey: caller.secretAccessKey },
      sha256: Sha256,
      // Sign exactly the headers the caller signed: curl, for one, does not send x-amz-content-sha256.
      applyChecksum: false,
    });
    const expected = await signer.sign(
      {
        method: request.method.toUpperCase(),
        protocol: 'http:',
        // The signed Host header is what is signed; the hostname is only the signer's fallback without one.
        hostname: headers.host ?? '',
        path: url.pathname,
        query,
        headers,
        body: request.body,
      },
      { signingDate, signableHeaders: new Set(signedHeaders), unsignableHeaders: new Set() },
    );
    const expectedSignature = /Signature=([0-9a-f]{64})/.exec(
      String(expected.headers.authorization ?? ''),
    )?.[1];
    const expectedHeaders = /SignedHeaders=([^,]+)/.exec(String(expected.headers.authorization ?? ''))?.[1];
    const mismatch = refuse(
      'BAD_SIGNATURE',
      `the signature does not match: the secret key is not access key ${shownKey(caller.accessKeyId)}'s, or the method, path, query or a signed header changed after signing`,
    );
    if (!expectedSignature || expectedHeaders !== signedHeaderList) return mismatch;
    const same = timingSafeEqual(
      Buffer.from(expectedSignature),
      Buffer.from(signature ?? ''.padEnd(64, '0')),
    );
    return same ? { ok: true, caller } : mismatch;
  }
}

/** A Region or service name from the signature's scope, as a log may show it. */
const shownName = (value: string | undefined): string =>
  (value ?? '').replace(/[^a-z0-9-]/g, '').slice(0, 32);
