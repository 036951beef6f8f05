import { afterEach, describe, expect, it, vi } from 'vitest';
import { errorBodyProblems, fixture, parseBody } from './support/vend-harness.js';

const SETS = [
  {
    id: 'uat-advisor',
    environment: 'uat',
    companyRole: 'advisor',
    vendorBaseUrl: 'https://pms-uat.vendor.example.com',
    secretId: 'token-broker/uat-advisor',
  },
];
const CONSUMERS = [
  {
    name: 'portfolio',
    principalArn: 'arn:aws:iam::123456789012:role/portfolio-service',
    credentialSets: ['uat-advisor'],
  },
];
const GOOD_ENV = {
  AWS_REGION: 'eu-west-1',
  CREDENTIAL_SETS: JSON.stringify(SETS),
  CONSUMERS: JSON.stringify(CONSUMERS),
  TOKENS_TABLE_NAME: 'broker-tokens',
  LEDGER_TABLE_NAME: 'broker-ledger',
  REFRESHER_FUNCTION_NAME: 'broker-refresher',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
};

async function load(env: Record<string, string | undefined>) {
  vi.resetModules();
  for (const [name, value] of Object.entries({ ...GOOD_ENV, ...env })) vi.stubEnv(name, value);
  return import('../functions/vend-token.js');
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('functions/vend-token.ts (the Lambda entry point)', () => {
  it('builds its handler from the environment at cold start', async () => {
    const { handler } = await load({});
    // Requests that need no AWS call: nothing here may reach AWS.
    const outsider = await handler(fixture('get-token-unknown-role'), {} as never);
    expect(outsider.statusCode).toBe(403);
    expect(errorBodyProblems(outsider)).toEqual([]);
    const unknownRoute = await handler({ ...fixture('get-token'), rawPath: '/v1/nope' }, {} as never);
    expect(parseBody(unknownRoute)).toMatchObject({ errorStatus: 404, errorCode: 'RESOURCE_NOT_FOUND' });
  });

  it.each([
    [{ CONSUMERS: undefined }, /CONSUMERS is not set/],
    [{ REFRESHER_FUNCTION_NAME: ' ' }, /REFRESHER_FUNCTION_NAME is not set/],
    [{ CREDENTIAL_SETS: '{not json' }, /CREDENTIAL_SETS: not valid JSON/],
    [
      { CREDENTIAL_SETS: JSON.stringify([{ ...SETS[0], environment: 'staging' }]) },
      /CREDENTIAL_SETS\[0\]\.environment/,
    ],
    [
      { CONSUMERS: JSON.stringify([{ ...CONSUMERS[0], credentialSets: ['prod-advisor'] }]) },
      /CONSUMERS\[0\]\.credentialSets\[0\]: unknown credential set "prod-advisor"/,
    ],
    [
      {
        CONSUMERS: JSON.stringify([
          { ...CONSUMERS[0], principalArn: 'arn:aws:sts::123456789012:assumed-role/x/y' },
        ]),
      },
      /CONSUMERS\[0\]\.principalArn/,
    ],
  ])('a wrong environment fails the cold start naming the value: %o', async (env, message) => {
    await expect(load(env)).rejects.toThrow(message);
  });
});
