import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { type IncomingSignedRequest, type LocalCaller, SigV4Verifier } from '../local/sigv4-verifier.js';
import { ManualClock } from '../shared/clock.js';

const caller: LocalCaller = {
  accessKeyId: 'AKIALOCALTESTCALLER1',
  secretAccessKey: 'local-test-secret-key-1',
  principalArn: 'arn:aws:iam::000000000000:role/portfolio-service',
};
const clock = new ManualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
const verifier = new SigV4Verifier({ callers: [caller], clock, region: 'local' });

async function signedIncoming(
  init: { method: string; url: string; body?: string; headers?: Record<string, string> },
  credentials: { accessKeyId: string; secretAccessKey: string } = caller,
  region = 'local',
): Promise<IncomingSignedRequest> {
  const signer = new FunctionUrlSigner({ region, credentials });
  const signed = await signer.sign(init, new Date(clock.now()));
  const url = new URL(init.url);
  const headers: Record<string, string> = { host: url.host };
  for (const [k, v] of Object.entries(signed.headers)) headers[k.toLowerCase()] = v;
  return {
    method: init.method,
    pathWithQuery: `${url.pathname}${url.search}`,
    headers,
    body: init.body ?? '',
  };
}

describe('SigV4 between the consumer signer and the local verifier', () => {
  it('accepts a request signed by a known caller, with query and body', async () => {
    const request = await signedIncoming({
      method: 'POST',
      url: 'http://127.0.0.1:8787/v1/credential-sets/uat-advisor/permits?b=2&a=1',
      body: '{"tokenId":"abc","count":2}',
      headers: { 'content-type': 'application/json' },
    });
    const result = await verifier.verify(request);
    expect(result).toEqual({ ok: true, caller });
  });

  it('refuses a body changed after signing', async () => {
    const request = await signedIncoming({
      method: 'POST',
      url: 'http://127.0.0.1:8787/v1/x',
      body: '{"count":1}',
    });
    expect(await verifier.verify({ ...request, body: '{"count":50}' })).toEqual({
      ok: false,
      reason: 'BODY_HASH_MISMATCH',
      detail: 'the body does not hash to its x-amz-content-sha256: it changed after signing',
    });
  });

  it('refuses a path changed after signing', async () => {
    const request = await signedIncoming({
      method: 'GET',
      url: 'http://127.0.0.1:8787/v1/credential-sets/a/token',
    });
    expect(await verifier.verify({ ...request, pathWithQuery: '/v1/credential-sets/b/token' })).toMatchObject(
      {
        ok: false,
        reason: 'BAD_SIGNATURE',
      },
    );
  });

  it('refuses the wrong secret key, an unknown key, another region, and no signature, and says why without a secret', async () => {
    const url = 'http://127.0.0.1:8787/v1/credential-sets';
    const wrongSecret = await signedIncoming({ method: 'GET', url }, { ...caller, secretAccessKey: 'guess' });
    const refusals = [
      [
        wrongSecret,
        'BAD_SIGNATURE',
        "the signature does not match: the secret key is not access key AKIALOCALTESTCALLER1's, or the method, path, query or a signed header changed after signing",
      ],
      [
        await signedIncoming({ method: 'GET', url }, { accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' }),
        'UNKNOWN_ACCESS_KEY',
        `access key AKIAUNKNOWN is none of the local callers' ("callers" of the broker's configuration)`,
      ],
      [
        await signedIncoming({ method: 'GET', url }, caller, 'eu-west-1'),
        'WRONG_REGION',
        `signed for Region "eu-west-1"; this broker's is "local" (AWS_REGION=local, or --region local)`,
      ],
      [
        { method: 'GET', pathWithQuery: '/v1/credential-sets', headers: { host: 'h' }, body: '' },
        'MISSING_SIGNATURE',
        'no Authorization header: the request is not signed (SigV4, service "lambda"; curl: --aws-sigv4 "aws:amz:local:lambda" --user KEY:SECRET)',
      ],
    ] as const;
    for (const [request, reason, detail] of refusals) {
      const result = await verifier.verify(request);
      expect(result).toEqual({ ok: false, reason, detail });
      const said = JSON.stringify(result);
      expect(said).not.toContain(caller.secretAccessKey);
      expect(said).not.toContain('guess');
      expect(said).not.toMatch(/[0-9a-f]{64}/); // no signature
    }
  });

  it('accepts a signature over host and x-amz-date only, as curl --aws-sigv4 makes it', async () => {
    const signer = new SignatureV4({
      service: 'lambda',
      region: 'local',
      credentials: caller,
      sha256: Sha256,
      applyChecksum: false,
    });
    const signed = await signer.sign(
      {
        method: 'GET',
        protocol: 'http:',
        hostname: '127.0.0.1',
        port: 8787,
        path: '/v1/credential-sets/uat-advisor/token',
        query: {},
        headers: { host: '127.0.0.1:8787' },
      },
      { signingDate: new Date(clock.now()) },
    );
    const headers = Object.fromEntries(
      Object.entries(signed.headers).map(([k, v]) => [k.toLowerCase(), String(v)]),
    );
    expect(headers.authorization).toContain('SignedHeaders=host;x-amz-date,');
    const result = await verifier.verify({
      method: 'GET',
      pathWithQuery: '/v1/credential-sets/uat-advisor/token',
      headers,
      body: '',
    });
    expect(result).toEqual({ ok: true, caller });
  });

  it('refuses a signature older than five minutes', async () => {
    const request = await signedIncoming({ method: 'GET', url: 'http://127.0.0.1:8787/v1/credential-sets' });
    const later = new SigV4Verifier({
      callers: [caller],
      clock: new ManualClock(clock.now() + 5 * 60 * 1000 + 1000),
      region: 'local',
    });
    expect(await later.verify(request)).toEqual({
      ok: false,
      reason: 'STALE_REQUEST',
      detail:
        "signed at 2026-11-21T12:00:00.000Z, 301 s behind this broker's clock (at most 5 minutes either way)",
    });
  });
});
