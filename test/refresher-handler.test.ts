import { Logger } from '@aws-lambda-powertools/logger';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRefresherHandler } from '../functions/refresher-handler.js';
import { brokerConfigDocument } from '../shared/config/broker-config.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { InvalidRefreshRequestError, type RunSummary } from '../shared/tokens/index.js';
import { writeConfigDocument } from './support/config-document.js';
import {
  expectNoSecrets,
  refresherSuite,
  SCHEDULED_EVENT,
  sandboxPasswords,
} from './support/refresher-harness.js';

const context = {
  callbackWaitsForEmptyEventLoop: true,
  functionName: 'token-broker-uat-refresher',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:token-broker-uat-refresher',
  memoryLimitInMB: '256',
  awsRequestId: 'c6af9ac6-7b61-11e6-9a41-93e812345678',
  logGroupName: '/aws/lambda/token-broker-uat-refresher',
  logStreamName: '2026/01/05/[$LATEST]abcdef',
  getRemainingTimeInMillis: () => 60_000,
  done: () => undefined,
  fail: () => undefined,
  succeed: () => undefined,
} as Context;

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const suite = refresherSuite(T0);

describe('the refresher handler', () => {
  it('runs every set on a scheduled event and one set on a refresh action, answering with no token', async () => {
    const { world, set } = await suite.advisorWorld();
    const handler = createRefresherHandler({
      refresher: world.refresher('lambda-1', [set]),
      telemetry: new MemoryTelemetry(),
      logger: new Logger({ serviceName: 'token-broker', logLevel: 'SILENT' }),
    });

    const summary = (await handler(SCHEDULED_EVENT, context)) as RunSummary;
    expect(summary).toMatchObject({
      at: T0,
      sets: [{ credentialSetId: 'uat-advisor', action: 'LOGGED_IN' }],
    });
    const current = (await world.store.read(set.id, T0))?.current;

    const onDemand = await handler(
      {
        action: 'refresh',
        credentialSetId: set.id,
        reason: 'TOKEN_REJECTED',
        rejectedTokenId: 'f'.repeat(16),
      },
      context,
    );
    expect(onDemand).toEqual({
      status: 'CURRENT',
      tokenId: current?.tokenId,
      exp: current?.exp,
      loggedIn: false,
    });
    expectNoSecrets(JSON.stringify([summary, onDemand]), [...sandboxPasswords(), current?.accessToken ?? '']);
  });

  it.each([
    ['an unknown event', { hello: 'world' }],
    ['a refresh without a reason', { action: 'refresh', credentialSetId: 'uat-advisor' }],
    [
      'a refresh with a minimum validity of text',
      {
        action: 'refresh',
        credentialSetId: 'uat-advisor',
        reason: 'NO_USABLE_TOKEN',
        minValiditySeconds: '300',
      },
    ],
    ['nothing', null],
  ])('refuses %s, touching nothing', async (_case, event) => {
    const { world, set } = await suite.advisorWorld();
    const handler = createRefresherHandler({
      refresher: world.refresher('lambda-1', [set]),
      telemetry: new MemoryTelemetry(),
    });
    const loginsBefore = suite.uat.stats().loginRequests;
    await expect(handler(event, context)).rejects.toBeInstanceOf(InvalidRefreshRequestError);
    expect((await world.dynamo.client.send(new ScanCommand({ TableName: world.table }))).Count).toBe(0);
    expect(suite.uat.stats().loginRequests).toBe(loginsBefore);
  });
});

describe('the refresher function module', () => {
  const files: (() => void)[] = [];
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
    for (const remove of files.splice(0)) remove();
  });
  const goodSet = {
    id: 'prod-advisor',
    environment: 'prod',
    companyRole: 'advisor',
    vendorBaseUrl: 'https://api.vendor.example',
    secretId: 'token-broker/prod-advisor',
  };
  /** The refresher's document (its sets only) as a file, and BROKER_CONFIG_FILE naming it. */
  const document = (content: unknown) => {
    const { file, remove } = writeConfigDocument(
      typeof content === 'string'
        ? content
        : brokerConfigDocument({ stage: 'prod', credentialSets: content as unknown[] }),
    );
    files.push(remove);
    vi.stubEnv('BROKER_CONFIG_FILE', file);
  };

  it.each<[string, unknown, Record<string, string>, string]>([
    ['TOKENS_TABLE_NAME missing', [goodSet], {}, 'environment variable TOKENS_TABLE_NAME is not set'],
    ['a document that is not JSON', '[{', { TOKENS_TABLE_NAME: 't' }, 'broker-config.json: not valid JSON'],
    ['a document without sets', '{"format":1}', { TOKENS_TABLE_NAME: 't' }, 'broker-config.json.stage'],
    [
      'a plain-http vendor URL',
      [{ ...goodSet, vendorBaseUrl: 'http://api.vendor.example' }],
      { TOKENS_TABLE_NAME: 't' },
      'broker-config.json credentialSets[0].vendorBaseUrl: must be https://',
    ],
    [
      'a backoff cap below its base',
      [{ ...goodSet, refresh: { retryBackoffBaseSeconds: 120, retryBackoffMaxSeconds: 60 } }],
      { TOKENS_TABLE_NAME: 't' },
      'broker-config.json credentialSets[0].refresh.retryBackoffMaxSeconds: retryBackoffMaxSeconds must be at least retryBackoffBaseSeconds',
    ],
    [
      'a bad concurrency',
      [goodSet],
      { TOKENS_TABLE_NAME: 't', REFRESH_CONCURRENCY: '0' },
      'REFRESH_CONCURRENCY',
    ],
  ])('fails its cold start on %s, naming it', async (_case, content, env, message) => {
    vi.stubEnv('TOKENS_TABLE_NAME', '');
    document(content);
    for (const [key, value] of Object.entries(env)) vi.stubEnv(key, value);
    await expect(import('../functions/refresher.js')).rejects.toThrow(message);
  });

  it('fails its cold start without its configuration document, naming the file', async () => {
    vi.stubEnv('TOKENS_TABLE_NAME', 't');
    vi.stubEnv('BROKER_CONFIG_FILE', '');
    vi.stubEnv('LAMBDA_TASK_ROOT', '/nonexistent-task-root');
    await expect(import('../functions/refresher.js')).rejects.toThrow(
      'the configuration document /nonexistent-task-root/broker-config.json cannot be read (ENOENT)',
    );
  });

  it('builds its handler from a good document and environment without calling anything', async () => {
    document([goodSet]);
    vi.stubEnv('TOKENS_TABLE_NAME', 'token-broker-prod-tokens');
    vi.stubEnv('AWS_REGION', 'eu-west-1');
    const module = await import('../functions/refresher.js');
    expect(typeof module.handler).toBe('function');
  });
});
