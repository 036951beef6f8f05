import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import type { Clock } from '../shared/clock.js';
import { requestUrl, validHost } from './request-target.js';
import type { LocalCaller, RefusalReason, SigV4Verifier } from './sigv4-verifier.js';

export type FunctionUrlHandler = (
  event: APIGatewayProxyEventV2WithIAMAuthorizer,
  context: Context,
) => Promise<APIGatewayProxyResultV2>;

/** Lambda Function URLs accept request payloads up to 6 MB; the handler applies its own, smaller cap. */
const MAX_REQUEST_BYTES = 6 * 1024 * 1024;

/**
 * How AWS presents an IAM role caller to the function: as its assumed-role session, not as the role ARN.
 * A user ARN is presented as it is.
 */
export function presentedPrincipal(principalArn: string, session = 'local-session'): string {
  const role = /^arn:(aws[a-z-]*):iam::(\d{12}):role\/(?:.*\/)?([^/]+)$/.exec(principalArn);
  return role ? `arn:${role[1]}:sts::${role[2]}:assumed-role/${role[3]}/${session}` : principalArn;
}

/** The payload-format-2.0 event a Function URL with IAM auth gives the function, built from a node:http request. */
export function toFunctionUrlEvent(
  request: {
    method: string;
    pathWithQuery: string;
    headers: Record<string, string>;
    body: Buffer;
    sourceIp: string;
  },
  caller: LocalCaller,
  now: number,
): APIGatewayProxyEventV2WithIAMAuthorizer {
  const url = requestUrl(request.pathWithQuery);
  if (!url) throw new Error('not an origin-form request target: check it with requestUrl first');
  const accountId = /:(\d{12}):/.exec(caller.principalArn)?.[1] ?? '000000000000';
  const queryStringParameters: Record<string, string> = {};
  for (const [key, value] of url.searchParams) {
    queryStringParameters[key] =
      key in queryStringParameters ? `${queryStringParameters[key]},${value}` : value;
  }
  const contentType = request.headers['content-type'] ?? '';
  const isText = request.body.length === 0 || /^(application\/json|text\/)/.test(contentType);
  const requestId = randomUUID();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers: request.headers,
    ...(url.search ? { queryStringParameters } : {}),
    requestContext: {
      accountId,
      apiId: 'local',
      authorizer: {
        iam: {
          accessKey: caller.accessKeyId,
          accountId,
          callerId: `AROALOCAL:${caller.accessKeyId}`,
          cognitoIdentity: null,
          principalOrgId: 'o-local',
          userArn: presentedPrincipal(caller.principalArn),
          userId: `AROALOCAL:${caller.accessKeyId}`,
        },
      },
      domainName: request.headers.host ?? 'localhost',
      domainPrefix: 'local',
      http: {
        method: request.method.toUpperCase(),
        path: url.pathname,
        protocol: 'HTTP/1.1',
        sourceIp: request.sourceIp,
        userAgent: request.headers['user-agent'] ?? '',
      },
      requestId,
      routeKey: '$default',
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
    },
    ...(request.body.length > 0
      ? {
          body: isText ? request.body.toString('utf8') : request.body.toString('base64'),
          isBase64Encoded: !isText,
        }
      : { isBase64Encoded: false }),
  };
}

function lambdaContext(requestId: string, functionName: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

async function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_REQUEST_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function send(
  response: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(body);
}

/** Writes what the function returned the way a Function URL does (payload format 2.0 response rules). */
function writeResult(response: ServerResponse, result: APIGatewayProxyResultV2): void {
  if (typeof result === 'string') {
    send(response, 200, result);
    return;
  }
  if (
    result &&
    typeof result === 'object' &&
    'statusCode' in result &&
    typeof result.statusCode === 'number'
  ) {
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(result.headers ?? {})) headers[key] = String(value);
    const body = result.body ?? '';
    response.writeHead(result.statusCode, headers);
    response.end(result.isBase64Encoded ? Buffer.from(body, 'base64') : body);
    return;
  }
  send(response, 200, JSON.stringify(result));
}

export interface FunctionUrlServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/**
 * Serves a Function URL handler on 127.0.0.1 with IAM auth: unsigned or badly signed requests get AWS's
 * `403 {"Message":"Forbidden"}` and never reach the function, exactly as behind a real Function URL.
 */
export async function serveFunctionUrl(options: {
  handler: FunctionUrlHandler;
  verifier: SigV4Verifier;
  clock: Clock;
  port?: number;
  functionName?: string;
  timeoutMs?: number;
  onError?: (error: unknown) => void;
  /**
   * Told why a request's signature was refused (the caller gets only AWS's `{"Message":"Forbidden"}`): the
   * local broker logs it, so a curl or Python user learns what to fix. Never a secret in it.
   */
  onRefused?: (refusal: { reason: RefusalReason; detail: string; method: string; path: string }) => void;
}): Promise<FunctionUrlServer> {
  const functionName = options.functionName ?? 'token-broker-vend';
  const server = createServer((request, response) => {
    void (async () => {
      const body = await readBody(request);
      if (!body)
        return send(response, 413, JSON.stringify({ Message: 'Request must be smaller than 6291456 bytes' }));
      const headers: Record<string, string> = {};
      for (const [key, value] of Object.entries(request.headers)) {
        if (value !== undefined) headers[key] = Array.isArray(value) ? value.join(',') : value;
      }
      const incoming = {
        method: request.method ?? 'GET',
        pathWithQuery: request.url ?? '/',
        headers,
        body: body.toString('utf8'),
      };
      // A target or Host that cannot be parsed: refused as AWS's front end refuses it, before any signature.
      if (!requestUrl(incoming.pathWithQuery) || !validHost(headers.host))
        return send(response, 400, JSON.stringify({ Message: 'Bad Request' }));
      const verified = await options.verifier.verify(incoming);
      if (!verified.ok) {
        options.onRefused?.({
          reason: verified.reason,
          detail: verified.detail,
          method: incoming.method.slice(0, 16),
          path: (requestUrl(incoming.pathWithQuery)?.pathname ?? '').slice(0, 200),
        });
        return send(response, 403, JSON.stringify({ Message: 'Forbidden' }));
      }
      const event = toFunctionUrlEvent(
        { ...incoming, body, sourceIp: request.socket.remoteAddress ?? '127.0.0.1' },
        verified.caller,
        options.clock.now(),
      );
      const context = lambdaContext(
        event.requestContext.requestId,
        functionName,
        options.timeoutMs ?? 30_000,
      );
      const result = await options.handler(event, context);
      writeResult(response, result);
    })().catch((error: unknown) => {
      options.onError?.(error);
      // What a Function URL answers when the function itself fails.
      if (!response.headersSent) send(response, 502, JSON.stringify({ Message: 'Internal Server Error' }));
      else response.destroy();
    });
  });
  // A port in use (EADDRINUSE) rejects here, with the error's code, rather than crashing the process later.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
