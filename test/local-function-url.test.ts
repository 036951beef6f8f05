import { connect } from 'node:net';
import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import {
  type FunctionUrlServer,
  presentedPrincipal,
  serveFunctionUrl,
} from '../local/function-url-server.js';
import { type LocalCaller, SigV4Verifier } from '../local/sigv4-verifier.js';
import { systemClock } from '../shared/clock.js';

const caller: LocalCaller = {
  accessKeyId: 'AKIALOCALTESTCALLER2',
  secretAccessKey: 'local-test-secret-key-2',
  principalArn: 'arn:aws:iam::000000000000:role/team/reporting-service',
};

/** Sends a request line and headers exactly as given (fetch would normalise them) and reads the status line. */
function rawRequest(url: string, head: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.end(`${head}\r\nConnection: close\r\n\r\n`));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      answer += chunk;
    });
    socket.on('error', reject);
    socket.on('end', () => {
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]),
        body: answer.slice(answer.indexOf('\r\n\r\n') + 4),
      });
    });
  });
}

describe('local Function URL server with IAM auth', () => {
  let server: FunctionUrlServer;
  const seen: APIGatewayProxyEventV2WithIAMAuthorizer[] = [];
  const refused: { reason: string; detail: string; method: string; path: string }[] = [];
  const signer = new FunctionUrlSigner({ region: 'local', credentials: caller });

  beforeAll(async () => {
    server = await serveFunctionUrl({
      clock: systemClock,
      verifier: new SigV4Verifier({ callers: [caller], clock: systemClock, region: 'local' }),
      onRefused: (refusal) => refused.push(refusal),
      handler: async (event) => {
        seen.push(event);
        return {
          statusCode: 201,
          headers: { 'x-echo': event.rawPath },
          body: JSON.stringify({ got: event.body }),
        };
      },
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it('hands a signed request to the handler as a payload 2.0 event with the caller as AWS presents it', async () => {
    const signed = await signer.sign({
      method: 'POST',
      url: `${server.url}/v1/credential-sets/uat-advisor/permits?dryRun=1`,
      headers: { 'content-type': 'application/json' },
      body: '{"count":1}',
    });
    const response = await fetch(signed.url, {
      method: signed.method,
      headers: signed.headers,
      body: signed.body,
    });
    expect(response.status).toBe(201);
    expect(response.headers.get('x-echo')).toBe('/v1/credential-sets/uat-advisor/permits');
    expect(await response.json()).toEqual({ got: '{"count":1}' });
    const event = seen.at(-1);
    expect(event?.version).toBe('2.0');
    expect(event?.rawQueryString).toBe('dryRun=1');
    expect(event?.queryStringParameters).toEqual({ dryRun: '1' });
    expect(event?.requestContext.http.method).toBe('POST');
    expect(event?.requestContext.authorizer.iam.userArn).toBe(
      'arn:aws:sts::000000000000:assumed-role/reporting-service/local-session',
    );
    expect(event?.requestContext.authorizer.iam.accountId).toBe('000000000000');
  });

  it('answers 403 Forbidden without calling the handler when the signature is missing or wrong', async () => {
    const before = seen.length;
    const unsigned = await fetch(`${server.url}/v1/credential-sets`);
    expect(unsigned.status).toBe(403);
    expect(await unsigned.json()).toEqual({ Message: 'Forbidden' });
    const signed = await signer.sign({ method: 'GET', url: `${server.url}/v1/credential-sets` });
    const tampered = await fetch(`${server.url}/v1/credential-sets/prod-advisor/token`, {
      headers: signed.headers,
    });
    expect(tampered.status).toBe(403);
    expect(seen.length).toBe(before);
    // The caller learns nothing more than from AWS; the server's owner (the local broker's log) learns why.
    expect(refused.slice(-2)).toEqual([
      expect.objectContaining({ reason: 'MISSING_SIGNATURE', method: 'GET', path: '/v1/credential-sets' }),
      expect.objectContaining({
        reason: 'BAD_SIGNATURE',
        method: 'GET',
        path: '/v1/credential-sets/prod-advisor/token',
      }),
    ]);
    expect(JSON.stringify(refused)).not.toContain(caller.secretAccessKey);
  });

  it('refuses a target or Host it cannot parse with 400, as AWS does, without calling the handler', async () => {
    const before = seen.length;
    const host = new URL(server.url).host;
    for (const head of [
      `GET http://elsewhere.example/v1/credential-sets HTTP/1.1\r\nHost: ${host}`,
      'GET /v1/credential-sets HTTP/1.1\r\nHost: a b',
      'GET /v1/credential-sets HTTP/1.1\r\nHost: a/b',
      'GET /v1/credential-sets HTTP/1.0',
    ]) {
      const answer = await rawRequest(server.url, head);
      expect({ head, status: answer.status }).toEqual({ head, status: 400 });
      expect(answer.body).toContain('{"Message":"Bad Request"}');
    }
    expect(seen.length).toBe(before);
  });

  it('reads a target starting with // as a path, not as another host', async () => {
    const unsigned = await rawRequest(server.url, `GET // HTTP/1.1\r\nHost: ${new URL(server.url).host}`);
    expect(unsigned.status).toBe(403);
    const signed = await signer.sign({ method: 'GET', url: `${server.url}//elsewhere.example/x?a=1` });
    const response = await fetch(signed.url, { headers: signed.headers });
    expect(response.status).toBe(201);
    expect(seen.at(-1)?.rawPath).toBe('//elsewhere.example/x');
    expect(seen.at(-1)?.rawQueryString).toBe('a=1');
  });

  it('presents user ARNs unchanged and role ARNs as assumed-role sessions', () => {
    expect(presentedPrincipal('arn:aws:iam::123456789012:user/ci')).toBe('arn:aws:iam::123456789012:user/ci');
    expect(presentedPrincipal('arn:aws:iam::123456789012:role/a')).toBe(
      'arn:aws:sts::123456789012:assumed-role/a/local-session',
    );
  });
});
