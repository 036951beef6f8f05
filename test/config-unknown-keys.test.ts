import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createBrokerApp } from '../infra/broker-app.js';
import { pipeline } from '../infra/stages/pipeline.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { loadLocalConfig } from '../local/config.js';
import { brokerConfigDocument } from '../shared/config/broker-config.js';
import { describeIssues, parseCredentialSets } from '../shared/config/credential-sets.js';
import { closestKey, unknownKeysError, unknownKeysMessage } from '../shared/config/unknown-keys.js';
import { runIn } from './support/cli-harness.js';
import { writeConfigDocument } from './support/config-document.js';
import { variant } from './support/stage-variants.js';

/**
 * A misspelt key in any configuration a person writes is an error naming it, where it is, and the key it was
 * probably meant to be; before, zod's plain objects dropped it and the default applied without a word.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'unknown-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function jsonFile(value: unknown): string {
  const file = path.join(dir, `config-${++files}.json`);
  writeFileSync(file, JSON.stringify(value));
  return file;
}
const SKIP_BUNDLING = { 'aws:cdk:bundling-stacks': [] };

describe('the suggestion for an unknown key', () => {
  it('names the closest known key, within a third of its length, and nothing when none is close', () => {
    const known = ['rateLimits', 'refresh', 'quotaScope', 'refreshIntervalSeconds', 'logRetentionDays'];
    expect(closestKey('rateLimit', known)).toBe('rateLimits');
    expect(closestKey('ratelimits', known)).toBe('rateLimits');
    expect(closestKey('qoutaScope', known)).toBe('quotaScope');
    expect(closestKey('refreshIntervalSecs', known)).toBe('refreshIntervalSeconds');
    expect(closestKey('logRetentionDay', known)).toBe('logRetentionDays');
    expect(closestKey('colour', known)).toBeUndefined();
    expect(unknownKeysMessage(['rateLimit'], known)).toBe(
      'unknown key `rateLimit`; did you mean `rateLimits`?',
    );
    expect(unknownKeysMessage(['colour'], known)).toBe('unknown key `colour`');
    expect(unknownKeysMessage(['rateLimit', 'colour'], known)).toBe(
      'unknown keys `rateLimit` (did you mean `rateLimits`?), `colour`',
    );
  });

  it('is given for a strict object that is one form of a union (a list, or an object with its own keys)', () => {
    const limit = z.strictObject({ limit: z.number(), windowSeconds: z.number() });
    const classes = z.record(
      z.string(),
      z.union([z.array(limit), z.strictObject({ paths: z.array(z.string()), limits: z.array(limit) })]),
    );
    const wrong = { reports: { path: ['/v1/reports'], limits: [{ limit: 5, windowSecs: 60 }] } };
    const result = classes.safeParse(wrong, { error: unknownKeysError });
    expect(result.success).toBe(false);
    expect(result.error && describeIssues(result.error, 'classes')).toBe(
      'classes.reports.paths: Invalid input: expected array, received undefined; ' +
        'classes.reports.limits[0].windowSeconds: Invalid input: expected number, received undefined; ' +
        'classes.reports.limits[0]: unknown key `windowSecs`; did you mean `windowSeconds`?; ' +
        'classes.reports: unknown key `path`; did you mean `paths`?',
    );
  });

  it("is given for a request class's object form, and for a limit of its list form", () => {
    const set = {
      id: 'uat-advisor',
      environment: 'uat',
      companyRole: 'advisor',
      vendorBaseUrl: 'https://pms-uat.vendor.example.com',
      secretId: 'token-broker/uat-advisor',
    };
    expect(() =>
      parseCredentialSets([{ ...set, rateLimits: { classes: { reports: { path: ['/reports/**'] } } } }]),
    ).toThrow('credentialSets[0].rateLimits.classes.reports: unknown key `path`; did you mean `paths`?');
    expect(() =>
      parseCredentialSets([
        { ...set, rateLimits: { classes: { reports: [{ limit: 5, windowSecond: 60, windowSeconds: 60 }] } } },
      ]),
    ).toThrow(
      'credentialSets[0].rateLimits.classes.reports[0]: unknown key `windowSecond`; did you mean `windowSeconds`?',
    );
  });
});

describe('an unknown key is an error', () => {
  it("in the local configuration, when npm start's loader reads it", () => {
    const file = jsonFile({
      credentialsFile: 'credentials.json',
      refreshIntervalSecs: 60,
      sandbox: { windowKnd: 'sliding' },
      credentialSets: [{ id: 'uat-advisor', environment: 'uat', companyRole: 'advisor', secretId: 'uat' }],
      callers: [
        {
          name: 'portfolio',
          accessKeyId: 'AKIALOCALPORTFOLIO01',
          secretAccessKey: 'local-only-portfolio-service-secret',
          principalArn: 'arn:aws:iam::000000000000:role/portfolio-service',
        },
      ],
      consumers: [],
    });
    expect(() => loadLocalConfig({ BROKER_CONFIG: file })).toThrow(
      `invalid configuration: ${file}.sandbox: unknown key \`windowKnd\`; did you mean \`windowKind\`?; ${file}: unknown key \`refreshIntervalSecs\`; did you mean \`refreshIntervalSeconds\`?`,
    );
  });

  it("in the local configuration, a reservation's region (the local broker is one Region)", () => {
    const file = jsonFile({
      credentialsFile: 'credentials.json',
      credentialSets: [
        {
          id: 'uat-advisor',
          environment: 'uat',
          companyRole: 'advisor',
          secretId: 'uat',
          rateLimits: {
            reservations: [{ consumer: 'portfolio', perWindow: { '60': 5 }, region: 'eu-west-1' }],
          },
        },
      ],
      callers: [
        {
          name: 'portfolio',
          accessKeyId: 'AKIALOCALPORTFOLIO01',
          secretAccessKey: 'local-only-portfolio-service-secret',
          principalArn: 'arn:aws:iam::000000000000:role/portfolio-service',
        },
      ],
      consumers: [
        {
          name: 'portfolio',
          principalArn: 'arn:aws:iam::000000000000:role/portfolio-service',
          credentialSets: ['uat-advisor'],
        },
      ],
    });
    expect(() => loadLocalConfig({ BROKER_CONFIG: file })).toThrow(
      `invalid configuration: ${file}.credentialSets[0].rateLimits.reservations[0].region: only in a deployed stage with \`regions\``,
    );
  });

  it('in a TypeScript stage, at synth', () => {
    const { logRetentionDays, ...rest } = uat;
    const stage = { ...rest, logRetentionDay: logRetentionDays };
    expect(() => createBrokerApp({ stages: [stage], context: { stage: 'uat', ...SKIP_BUNDLING } })).toThrow(
      'invalid stage "uat": uat: unknown key `logRetentionDay`; did you mean `logRetentionDays`?',
    );
  });

  it('in a JSON stage (cdk synth -c stageFile=…), nested in a credential set, at synth', () => {
    const stage = variant(prod, (s) => {
      Object.assign(s.credentialSets[1] ?? {}, {
        rateLimit: { reservations: [{ consumer: 'portfolio-service', perWindow: { 60: 10 } }] },
      });
    });
    const stageFile = jsonFile(stage);
    expect(() => createBrokerApp({ context: { stageFile, ...SKIP_BUNDLING } })).toThrow(
      'invalid stage "prod": prod.credentialSets[1]: unknown key `rateLimit`; did you mean `rateLimits`?',
    );
  });

  it("in the pipeline's configuration, at synth (-c pipeline=true)", () => {
    const wrong = { ...pipeline, smokeTest: { ...pipeline.smokeTest, rolename: 'smoke' } };
    expect(() =>
      createBrokerApp({ pipeline: wrong, context: { pipeline: 'true', ...SKIP_BUNDLING } }),
    ).toThrow('invalid pipeline: pipeline.smokeTest: unknown key `rolename`; did you mean `roleName`?');
  });

  it('in token-broker check-config, which exits 2 and says so on stderr', async () => {
    const stage = variant(prod, (s) => {
      Object.assign(s.credentialSets[0] ?? {}, {
        rateLimits: { reservation: [{ consumer: 'portfolio-service', perWindow: { 60: 10 } }] },
      });
      Object.assign(s, { colour: 'blue' });
    });
    const run = await runIn(['check-config', jsonFile(stage)]);
    expect(run.exit).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n').filter((line) => line.startsWith('error: '))).toEqual([
      'error: prod.credentialSets[0].rateLimits: unknown key `reservation`; did you mean `reservations`?',
      'error: prod: unknown key `colour`',
    ]);
    expect(run.stderr).toMatch(/error CONFIGURATION_INVALID: stage "prod" is not valid: 2 error\(s\)\n$/);
  });
});

describe("an unknown key in the functions' configuration document fails the cold start", () => {
  const set = {
    id: 'uat-advisor',
    environment: 'uat',
    companyRole: 'advisor',
    vendorBaseUrl: 'https://pms-uat.vendor.example.com',
    secretId: 'token-broker/uat-advisor',
  };
  const consumer = {
    name: 'portfolio',
    principalArn: 'arn:aws:iam::123456789012:role/portfolio-service',
    credentialSets: ['uat-advisor'],
  };
  const removes: (() => void)[] = [];
  afterEach(() => {
    vi.unstubAllEnvs();
    for (const remove of removes.splice(0)) remove();
  });
  /** Imports the entry point afresh, as a cold start does, with this document (not vouched for by a revision). */
  async function coldStart(entry: 'vend-token' | 'refresher', document: unknown) {
    vi.resetModules();
    const { file, remove } = writeConfigDocument(document);
    removes.push(remove);
    const env = {
      AWS_REGION: 'eu-west-1',
      TOKENS_TABLE_NAME: 'broker-tokens',
      LEDGER_TABLE_NAME: 'broker-ledger',
      REFRESHER_FUNCTION_NAME: 'broker-refresher',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      BROKER_CONFIG_FILE: file,
    };
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    return entry === 'vend-token'
      ? import('../functions/vend-token.js')
      : import('../functions/refresher.js');
  }

  it.each<[string, 'vend-token' | 'refresher', unknown, string]>([
    [
      "a set's refresh setting",
      'refresher',
      brokerConfigDocument({ stage: 'uat', credentialSets: [{ ...set, refresh: { leaseSecond: 30 } }] }),
      'invalid configuration: broker-config.json credentialSets[0].refresh: unknown key `leaseSecond`; did you mean `leaseSeconds`?',
    ],
    [
      "a consumer's field",
      'vend-token',
      brokerConfigDocument({
        stage: 'uat',
        credentialSets: [set],
        consumers: [{ ...consumer, principalArns: [consumer.principalArn] }],
      }),
      'invalid configuration: broker-config.json consumers[0]: unknown key `principalArns`; did you mean `principalArn`?',
    ],
    [
      "an operator's field",
      'vend-token',
      brokerConfigDocument({
        stage: 'uat',
        credentialSets: [set],
        consumers: [consumer],
        operators: [{ name: 'oncall', principalArn: consumer.principalArn, credentialSet: ['uat-advisor'] }],
      }),
      'invalid configuration: broker-config.json operators[0]: unknown key `credentialSet`; did you mean `credentialSets`?',
    ],
    [
      'the document itself',
      'vend-token',
      { ...brokerConfigDocument({ stage: 'uat', credentialSets: [set] }), consumer: [consumer] },
      'invalid configuration: broker-config.json: unknown key `consumer`; did you mean `consumers`?',
    ],
  ])('%s (%s)', async (_case, entry, document, message) => {
    await expect(coldStart(entry, document)).rejects.toThrow(message);
  });
});
