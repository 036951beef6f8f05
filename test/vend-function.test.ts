import { afterEach, describe, expect, it, vi } from 'vitest';
import { brokerConfigDocument, brokerConfigText, configRevision } from '../shared/config/broker-config.js';
import { writeConfigDocument } from './support/config-document.js';
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
  TOKENS_TABLE_NAME: 'broker-tokens',
  LEDGER_TABLE_NAME: 'broker-ledger',
  REFRESHER_FUNCTION_NAME: 'broker-refresher',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
};
const GOOD_DOCUMENT = { credentialSets: SETS, consumers: CONSUMERS };
const files: (() => void)[] = [];

/** Imports the entry point afresh with this environment and this configuration document (a value or text). */
async function load(env: Record<string, string | undefined>, document: unknown = GOOD_DOCUMENT) {
  vi.resetModules();
  const { file, remove } = writeConfigDocument(
    typeof document === 'string'
      ? document
      : brokerConfigDocument({ stage: 'test', ...(document as { credentialSets: unknown[] }) }),
  );
  files.push(remove);
  for (const [name, value] of Object.entries({ ...GOOD_ENV, BROKER_CONFIG_FILE: file, ...env })) {
    vi.stubEnv(name, value);
  }
  return import('../functions/vend-token.js');
}

afterEach(() => {
  vi.unstubAllEnvs();
  for (const remove of files.splice(0)) remove();
});

describe('functions/vend-token.ts (the Lambda entry point)', () => {
  it('builds its handler from its configuration document and environment at cold start', async () => {
    const { handler } = await load({});
    // Requests that need no AWS call: nothing here may reach AWS.
    const outsider = await handler(fixture('get-token-unknown-role'), {} as never);
    expect(outsider.statusCode).toBe(403);
    expect(errorBodyProblems(outsider)).toEqual([]);
    const unknownRoute = await handler({ ...fixture('get-token'), rawPath: '/v1/nope' }, {} as never);
    expect(parseBody(unknownRoute)).toMatchObject({ errorStatus: 404, errorCode: 'RESOURCE_NOT_FOUND' });
  });

  it.each<[string, Record<string, string | undefined>, unknown, RegExp]>([
    ['no table name', { LEDGER_TABLE_NAME: undefined }, GOOD_DOCUMENT, /LEDGER_TABLE_NAME is not set/],
    [
      'a blank function name',
      { REFRESHER_FUNCTION_NAME: ' ' },
      GOOD_DOCUMENT,
      /REFRESHER_FUNCTION_NAME is not set/,
    ],
    [
      'no document',
      { BROKER_CONFIG_FILE: '/nonexistent/broker-config.json' },
      GOOD_DOCUMENT,
      /broker-config\.json cannot be read \(ENOENT\)/,
    ],
    ['a document that is not JSON', {}, '{not json', /broker-config\.json: not valid JSON/],
    [
      'a document edited after synth (its consumers removed)',
      {
        BROKER_CONFIG_REVISION: configRevision(
          brokerConfigText(brokerConfigDocument({ stage: 'test', ...GOOD_DOCUMENT })),
        ),
      },
      JSON.stringify({ ...brokerConfigDocument({ stage: 'test', ...GOOD_DOCUMENT }), consumers: [] }),
      /broker-config\.json is revision [0-9a-f]{16}, the function was deployed with [0-9a-f]{16} \(changed after synth\?\)/,
    ],
    [
      'a document of another revision than the stack deployed',
      { BROKER_CONFIG_REVISION: '0123456789abcdef' },
      GOOD_DOCUMENT,
      /the function was deployed with 0123456789abcdef/,
    ],
    [
      'a set of an unknown environment',
      {},
      { ...GOOD_DOCUMENT, credentialSets: [{ ...SETS[0], environment: 'staging' }] },
      /broker-config\.json credentialSets\[0\]\.environment/,
    ],
    [
      'a consumer of an unknown set',
      {},
      { ...GOOD_DOCUMENT, consumers: [{ ...CONSUMERS[0], credentialSets: ['prod-advisor'] }] },
      /broker-config\.json consumers\[0\]\.credentialSets\[0\]: unknown credential set "prod-advisor"/,
    ],
    [
      'a consumer named by a session ARN',
      {},
      {
        ...GOOD_DOCUMENT,
        consumers: [{ ...CONSUMERS[0], principalArn: 'arn:aws:sts::123456789012:assumed-role/x/y' }],
      },
      /broker-config\.json consumers\[0\]\.principalArn/,
    ],
  ])('fails the cold start on %s, naming it', async (_case, env, document, message) => {
    await expect(load(env, document)).rejects.toThrow(message);
  });
});
