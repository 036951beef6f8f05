import { inspect } from 'node:util';
import { InvokeCommand, type InvokeCommandOutput, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { LambdaRefreshInvoker } from '../shared/vend/lambda-refresh-invoker.js';

// No local Lambda exists: the invoke is checked against a client mock (aws-sdk-client-mock).
const lambdaMock = mockClient(LambdaClient);
// The SDK wraps payloads in a blob adapter; a plain Uint8Array is what the invoker reads either way.
const bytes = (text: string) => new TextEncoder().encode(text) as unknown as InvokeCommandOutput['Payload'];
const encode = (value: unknown) => bytes(JSON.stringify(value));
const invoker = () =>
  new LambdaRefreshInvoker({
    client: new LambdaClient({
      region: 'eu-west-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    }),
    functionName: 'token-broker-refresher',
  });

afterEach(() => lambdaMock.reset());

describe('LambdaRefreshInvoker', () => {
  it('invokes the refresher synchronously with {action: "refresh", ...request} and returns its outcome', async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: encode({ status: 'CURRENT', tokenId: '0123456789abcdef', exp: 1767618000, loggedIn: true }),
    });
    const outcome = await invoker().refresh({
      credentialSetId: 'uat-advisor',
      reason: 'NO_USABLE_TOKEN',
      minValiditySeconds: 600,
    });
    expect(outcome).toEqual({
      status: 'CURRENT',
      tokenId: '0123456789abcdef',
      exp: 1767618000,
      loggedIn: true,
    });
    const calls = lambdaMock.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]?.args[0].input;
    expect(input?.FunctionName).toBe('token-broker-refresher');
    expect(input?.InvocationType).toBe('RequestResponse');
    expect(JSON.parse(new TextDecoder().decode(input?.Payload as Uint8Array))).toEqual({
      action: 'refresh',
      credentialSetId: 'uat-advisor',
      reason: 'NO_USABLE_TOKEN',
      minValiditySeconds: 600,
    });
  });

  it('passes a rejection report on and reads an UNAVAILABLE outcome', async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: encode({ status: 'UNAVAILABLE', errorCode: 'INVALID_CREDENTIALS', retryAfterSeconds: 840 }),
    });
    const outcome = await invoker().refresh({
      credentialSetId: 'uat-advisor',
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: 'fedcba9876543210',
    });
    expect(outcome).toEqual({
      status: 'UNAVAILABLE',
      errorCode: 'INVALID_CREDENTIALS',
      retryAfterSeconds: 840,
    });
    const payload = lambdaMock.commandCalls(InvokeCommand)[0]?.args[0].input.Payload as Uint8Array;
    expect(JSON.parse(new TextDecoder().decode(payload))).toMatchObject({
      action: 'refresh',
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: 'fedcba9876543210',
    });
  });

  it('drops anything but the outcome fields, so a token in the payload could never travel on', async () => {
    const leaked = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsZWFrIn0.c2lnbmF0dXJl';
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: encode({
        status: 'CURRENT',
        tokenId: '0123456789abcdef',
        exp: 1,
        loggedIn: false,
        accessToken: leaked,
      }),
    });
    const outcome = await invoker().refresh({ credentialSetId: 'uat-advisor', reason: 'NO_USABLE_TOKEN' });
    expect(JSON.stringify(outcome)).not.toContain(leaked);
  });

  it('a function error becomes REFRESHER_UNAVAILABLE naming the error type only, never its message', async () => {
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      FunctionError: 'Unhandled',
      Payload: encode({
        errorType: 'TokenStoreUnavailableError',
        errorMessage: 'details for the refresher logs',
      }),
    });
    const error = await invoker()
      .refresh({ credentialSetId: 'uat-advisor', reason: 'NO_USABLE_TOKEN' })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'REFRESHER_UNAVAILABLE' });
    expect(String((error as Error).message)).toContain('TokenStoreUnavailableError');
    expect(inspect(error)).not.toContain('details for the refresher logs');
  });

  it('an SDK failure, a non-JSON or unknown answer each become REFRESHER_UNAVAILABLE', async () => {
    const attempt = () =>
      invoker()
        .refresh({ credentialSetId: 'uat-advisor', reason: 'NO_USABLE_TOKEN' })
        .then(
          () => 'resolved',
          (e: unknown) => (e as { code: string }).code,
        );
    lambdaMock
      .on(InvokeCommand)
      .rejects(Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' }));
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
    lambdaMock.reset();
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: bytes('<html>') });
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
    lambdaMock.reset();
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 200, Payload: encode({ status: 'MAYBE' }) });
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
  });
});
