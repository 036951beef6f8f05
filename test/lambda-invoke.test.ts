import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SigV4Verifier } from '../local/sigv4-verifier.js';
import { lambdaEndpoint, SignedLambdaInvoker } from '../shared/aws/lambda-invoke.js';
import { systemClock } from '../shared/clock.js';

/**
 * The vend function's Lambda Invoke client against a local HTTP server standing in for Lambda's Invoke API:
 * the server checks the SigV4 signature as AWS does (local/sigv4-verifier.ts, service "lambda").
 */
const CALLER = {
  accessKeyId: 'AKIATESTINVOKE00001',
  secretAccessKey: 'test-only-invoke-secret-0001',
  principalArn: 'arn:aws:iam::123456789012:role/vend',
};
const verifier = new SigV4Verifier({ callers: [CALLER], clock: systemClock, region: 'eu-west-1' });

interface Seen {
  path: string;
  invocationType: string | undefined;
  body: string;
  signature: string;
}
let seen: Seen[] = [];
/** Each request gets the next scripted answer: status, headers, body. */
let script: { status: number; headers?: Record<string, string>; body: string }[] = [];

async function handle(
  request: IncomingMessage,
): Promise<{ status: number; headers?: Record<string, string>; body: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString();
  const headers = Object.fromEntries(
    Object.entries(request.headers).map(([name, value]) => [
      name,
      Array.isArray(value) ? value.join(',') : value,
    ]),
  );
  const verified = await verifier.verify({
    method: request.method ?? '',
    pathWithQuery: request.url ?? '',
    headers,
    body,
  });
  seen.push({
    path: request.url ?? '',
    invocationType: headers['x-amz-invocation-type'],
    body,
    signature: verified.ok ? 'valid' : verified.reason,
  });
  if (!verified.ok)
    return { status: 403, headers: { 'x-amzn-errortype': 'InvalidSignatureException' }, body: '{}' };
  return script.shift() ?? { status: 500, body: 'no answer scripted' };
}

let server: Server;
let endpoint: string;
beforeAll(async () => {
  server = createServer((request, response) => {
    void handle(request).then(({ status, headers, body }) => {
      response.writeHead(status, { 'content-type': 'application/json', ...headers });
      response.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  seen = [];
  script = [];
});

const invoker = (credentials = CALLER) =>
  new SignedLambdaInvoker({ region: 'eu-west-1', endpoint, credentials });
const payload = new TextEncoder().encode(
  JSON.stringify({ action: 'refresh', credentialSetId: 'uat-advisor' }),
);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe('SignedLambdaInvoker', () => {
  it('posts the payload to the function’s invocations path, RequestResponse, with a valid SigV4 signature', async () => {
    script = [{ status: 200, body: '{"status":"CURRENT"}' }];
    const output = await invoker().invoke({ functionName: 'token-broker-refresher', payload });
    expect(output).toEqual({ statusCode: 200, payload: new TextEncoder().encode('{"status":"CURRENT"}') });
    expect(seen).toEqual([
      {
        path: '/2015-03-31/functions/token-broker-refresher/invocations',
        invocationType: 'RequestResponse',
        body: text(payload),
        signature: 'valid',
      },
    ]);
  });

  it('returns a function error with its payload (the caller decides what to read of it)', async () => {
    script = [
      { status: 200, headers: { 'x-amz-function-error': 'Unhandled' }, body: '{"errorType":"Boom"}' },
    ];
    const output = await invoker().invoke({ functionName: 'f', payload });
    expect(output.functionError).toBe('Unhandled');
    expect(text(output.payload)).toBe('{"errorType":"Boom"}');
  });

  it('tries a throttle or a 5xx once more; a second one, or a 4xx, is an error naming status and type only', async () => {
    script = [
      { status: 500, body: '{}' },
      { status: 200, body: '"ok"' },
    ];
    expect(text((await invoker().invoke({ functionName: 'f', payload })).payload)).toBe('"ok"');
    expect(seen).toHaveLength(2);
    const throttle = {
      status: 429,
      headers: { 'x-amzn-errortype': 'TooManyRequestsException:' },
      body: '{"message":"Rate exceeded"}',
    };
    script = [throttle, throttle];
    await expect(invoker().invoke({ functionName: 'f', payload })).rejects.toMatchObject({
      name: 'LambdaInvokeError',
      status: 429,
      errorType: 'TooManyRequestsException',
      message: 'Lambda Invoke answered 429 (TooManyRequestsException)',
    });
    seen = [];
    script = [{ status: 404, headers: { 'x-amzn-errortype': 'ResourceNotFoundException' }, body: '{}' }];
    await expect(invoker().invoke({ functionName: 'f', payload })).rejects.toMatchObject({ status: 404 });
    expect(seen).toHaveLength(1);
  });

  it('is refused by a server that checks signatures when the secret is wrong (the check is real)', async () => {
    const wrong = { ...CALLER, secretAccessKey: 'not-the-secret-of-this-key' };
    await expect(invoker(wrong).invoke({ functionName: 'f', payload })).rejects.toMatchObject({
      status: 403,
      errorType: 'InvalidSignatureException',
    });
    expect(seen[0]?.signature).toBe('BAD_SIGNATURE');
  });

  it('stops at an abort without trying again', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      invoker().invoke({ functionName: 'f', payload }, { abortSignal: controller.signal }),
    ).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen).toHaveLength(0);
  });

  it('uses the regional endpoint, the China partition’s domain, or the one configured', () => {
    expect(lambdaEndpoint('eu-west-1')).toBe('https://lambda.eu-west-1.amazonaws.com');
    expect(lambdaEndpoint('cn-north-1')).toBe('https://lambda.cn-north-1.amazonaws.com.cn');
    expect(lambdaEndpoint('eu-west-1', 'http://127.0.0.1:9001')).toBe('http://127.0.0.1:9001');
  });
});
