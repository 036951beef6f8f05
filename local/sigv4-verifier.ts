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

export type VerifyResult =
  | { ok: true; caller: LocalCaller }
  | {
      ok: false;
      reason:
        | 'MISSING_SIGNATURE'
        | 'MALFORMED_SIGNATURE'
        | 'UNKNOWN_ACCESS_KEY'
        | 'STALE_REQUEST'
        | 'BAD_SIGNATURE';
    };

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
    if (!authorization) return { ok: false, reason: 'MISSING_SIGNATURE' };
    const match = AUTH_PATTERN.exec(authorization.trim());
    const amzDate = request.headers['x-amz-date'];
    const dateParts = amzDate ? AMZ_DATE.exec(amzDate) : null;
    if (!match || !dateParts) return { ok: false, reason: 'MALFORMED_SIGNATURE' };
    const [, accessKeyId, scopeDate, region, service, signedHeaderList, signature] =
      match as unknown as string[];
    if (region !== this.#region || service !== 'lambda' || !amzDate?.startsWith(scopeDate ?? '')) {
      return { ok: false, reason: 'MALFORMED_SIGNATURE' };
    }
    const caller = this.#callers.get(accessKeyId ?? '');
    if (!caller) return { ok: false, reason: 'UNKNOWN_ACCESS_KEY' };

    const [, y, mo, d, h, mi, s] = dateParts.map(Number) as number[];
    const signingDate = new Date(Date.UTC(y ?? 0, (mo ?? 1) - 1, d, h, mi, s));
    if (Math.abs(this.#clock.now() - signingDate.getTime()) > MAX_SKEW_MS)
      return { ok: false, reason: 'STALE_REQUEST' };

    const signedHeaders = (signedHeaderList ?? '').split(';');
    if (!signedHeaders.includes('host')) return { ok: false, reason: 'MALFORMED_SIGNATURE' };
    const headers: Record<string, string> = {};
    for (const name of signedHeaders) {
      const value = request.headers[name];
      if (value === undefined) return { ok: false, reason: 'BAD_SIGNATURE' };
      headers[name] = value;
    }
    // The signature covers this header, not the body: the body must hash to it (AWS checks the same).
    const payloadHash = headers['x-amz-content-sha256'];
    if (
      payloadHash !== undefined &&
      payloadHash !== createHash('sha256').update(request.body).digest('hex')
    ) {
      return { ok: false, reason: 'BAD_SIGNATURE' };
    }
    const url = requestUrl(request.pathWithQuery);
    if (!url) return { ok: false, reason: 'MALFORMED_SIGNATURE' };
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
    if (!expectedSignature || expectedHeaders !== signedHeaderList)
      return { ok: false, reason: 'BAD_SIGNATURE' };
    const same = timingSafeEqual(
      Buffer.from(expectedSignature),
      Buffer.from(signature ?? ''.padEnd(64, '0')),
    );
    return same ? { ok: true, caller } : { ok: false, reason: 'BAD_SIGNATURE' };
  }
}
