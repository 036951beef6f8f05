import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  LambdaInvokeError,
  type LambdaInvokeOutput,
  type LambdaInvoker,
} from '../shared/aws/lambda-invoke.js';
import { LambdaRefreshInvoker } from '../shared/vend/lambda-refresh-invoker.js';

// The invoke itself (SigV4, HTTP, retries) is tested against a local server in lambda-invoke.test.ts; here the
// invoker's reading of the refresher's answer, through a scripted LambdaInvoker.
const calls: { functionName: string; payload: Uint8Array }[] = [];
let answer: () => Promise<LambdaInvokeOutput> = () => Promise.reject(new Error('no answer scripted'));
const lambda: LambdaInvoker = {
  invoke(input) {
    calls.push(input);
    return answer();
  },
};
const answers = (output: Omit<LambdaInvokeOutput, 'statusCode'>) => {
  answer = () => Promise.resolve({ statusCode: 200, ...output });
};
const bytes = (text: string) => new TextEncoder().encode(text);
const encode = (value: unknown) => bytes(JSON.stringify(value));
const invoker = () => new LambdaRefreshInvoker({ client: lambda, functionName: 'token-broker-refresher' });

afterEach(() => {
  calls.length = 0;
});

describe('LambdaRefreshInvoker', () => {
  it('invokes the refresher synchronously with {action: "refresh", ...request} and returns its outcome', async () => {
    answers({
      payload: encode({ status: 'CURRENT', tokenId: '0123456789abcdef', exp: 1767618000, loggedIn: true }),
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
    expect(calls).toHaveLength(1);
    const input = calls[0];
    expect(input?.functionName).toBe('token-broker-refresher');
    expect(JSON.parse(new TextDecoder().decode(input?.payload))).toEqual({
      action: 'refresh',
      credentialSetId: 'uat-advisor',
      reason: 'NO_USABLE_TOKEN',
      minValiditySeconds: 600,
    });
  });

  it('passes a rejection report on and reads an UNAVAILABLE outcome', async () => {
    answers({
      payload: encode({ status: 'UNAVAILABLE', errorCode: 'INVALID_CREDENTIALS', retryAfterSeconds: 840 }),
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
    expect(JSON.parse(new TextDecoder().decode(calls[0]?.payload))).toMatchObject({
      action: 'refresh',
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: 'fedcba9876543210',
    });
  });

  it('drops anything but the outcome fields, so a token in the payload could never travel on', async () => {
    const leaked = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsZWFrIn0.c2lnbmF0dXJl';
    answers({
      payload: encode({
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
    answers({
      functionError: 'Unhandled',
      payload: encode({
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

  it('a failed invoke, a non-JSON or unknown answer each become REFRESHER_UNAVAILABLE', async () => {
    const attempt = () =>
      invoker()
        .refresh({ credentialSetId: 'uat-advisor', reason: 'NO_USABLE_TOKEN' })
        .then(
          () => 'resolved',
          (e: unknown) => (e as { code: string }).code,
        );
    answer = () => Promise.reject(new LambdaInvokeError(429, 'TooManyRequestsException'));
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
    answers({ payload: bytes('<html>') });
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
    answers({ payload: encode({ status: 'MAYBE' }) });
    expect(await attempt()).toBe('REFRESHER_UNAVAILABLE');
  });
});
