import { describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import {
  functionConfigDocuments,
  MAX_CONFIG_DOCUMENT_BYTES,
  MAX_CREDENTIAL_SETS,
  MAX_URL_ACCOUNTS,
  parseStageConfig,
  type StageInput,
} from '../infra/stage-config.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { generateStage } from '../infra/tools/generate-stage.js';
import { parseBrokerConfig, verifyBrokerConfig } from '../shared/config/broker-config.js';
import { type CredentialSetConfig, parseCredentialSets } from '../shared/config/credential-sets.js';
import { stageFailureOf, variant } from './support/stage-variants.js';

const SKIP_BUNDLING = { 'aws:cdk:bundling-stacks': [] };

/** The stage with its second set logging in with the first set's secret, and the sets' quota scopes. */
const oneSecret = (base: StageInput, first: 'token' | 'user', second: 'token' | 'user') =>
  variant(base, (s) => {
    const [a, b] = s.credentialSets;
    Object.assign(a ?? {}, { quotaScope: first });
    Object.assign(b ?? {}, { quotaScope: second, secretName: a?.secretName });
  });

describe('stage configuration', () => {
  it('accepts the uat and prod stages, with defaults filled in', () => {
    const parsed = [uat, prod].map(parseStageConfig);
    expect(parsed.map((s) => [s.name, s.account, s.region, s.production])).toEqual([
      ['uat', '111111111111', 'eu-west-1', false],
      ['prod', '222222222222', 'eu-west-1', true],
    ]);
    for (const stage of parsed) {
      expect(stage.refreshScheduleMinutes).toBe(5);
      for (const set of stage.credentialSets) expect(set.environment).toBe(stage.vendorEnvironment);
    }
  });

  const cases: [string, StageInput, string][] = [
    ['a short account id', variant(prod, (s) => Object.assign(s, { account: '12345' })), 'prod.account'],
    ['a made-up Region', variant(uat, (s) => Object.assign(s, { region: 'Europe' })), 'uat.region'],
    [
      'a vendor URL over plain HTTP',
      variant(uat, (s) =>
        Object.assign(s.credentialSets[0] ?? {}, { vendorBaseUrl: 'http://uat.example.com' }),
      ),
      'uat.credentialSets[0].vendorBaseUrl: must be https:// in a deployed stage',
    ],
    [
      'a set of the other vendor environment',
      variant(uat, (s) => Object.assign(s.credentialSets[1] ?? {}, { environment: 'prod' })),
      'uat.credentialSets[1].environment: "prod" in a stage for the vendor\'s "uat" environment',
    ],
    [
      'a duplicate set id',
      variant(uat, (s) => Object.assign(s.credentialSets[1] ?? {}, { id: 'uat-advisor' })),
      'uat.credentialSets[1].id: duplicate credential set id "uat-advisor"',
    ],
    [
      'a secret given by ARN',
      variant(prod, (s) =>
        Object.assign(s.credentialSets[0] ?? {}, {
          secretName: 'arn:aws:secretsmanager:eu-west-1:222222222222:secret:x-AbCdEf',
        }),
      ),
      'prod.credentialSets[0].secretName',
    ],
    [
      'a missing secret name',
      variant(prod, (s) => {
        delete (s.credentialSets[1] as { secretName?: string }).secretName;
      }),
      'prod.credentialSets[1].secretName',
    ],
    [
      'a consumer naming a set the stage does not have',
      variant(uat, (s) => s.consumers[1]?.credentialSets.push('prod-advisor')),
      'uat.consumers[1].credentialSets[1]: unknown credential set "prod-advisor"',
    ],
    [
      'a consumer principal that is not an IAM ARN',
      variant(prod, (s) => Object.assign(s.consumers[0] ?? {}, { principalArn: 'portfolio-service' })),
      'prod.consumers[0].principalArn',
    ],
    [
      'two consumers with one principal',
      variant(prod, (s) =>
        Object.assign(s.consumers[1] ?? {}, { principalArn: s.consumers[0]?.principalArn }),
      ),
      'prod.consumers[1].principalArn: duplicate principal',
    ],
    [
      'a reservation for someone who is not a consumer of the set',
      variant(uat, (s) =>
        Object.assign(s.credentialSets[0] ?? {}, {
          rateLimits: { reservations: [{ consumer: 'nobody', perWindow: { 60: 20 } }] },
        }),
      ),
      'uat.credentialSets[0].rateLimits.reservations[0].consumer: "nobody" is not a consumer of credential set',
    ],
    [
      'reservations leaving less than 10 % of a limit shared',
      variant(uat, (s) =>
        Object.assign(s.credentialSets[0] ?? {}, {
          rateLimits: { reservations: [{ consumer: 'nobody', perWindow: { 60: 46 } }] },
        }),
      ),
      'uat.credentialSets[0].rateLimits.reservations: rate limit settings: reservations in the 60 s window add up to 46, over 45',
    ],
    [
      'nobody to notify',
      variant(uat, (s) => Object.assign(s, { alarms: { emails: [] } })),
      'uat.alarms: needs at least one notification target',
    ],
    [
      'a notification e-mail that is not one',
      variant(uat, (s) => Object.assign(s, { alarms: { emails: ['on-call'] } })),
      'uat.alarms.emails[0]',
    ],
    [
      'a log retention CloudWatch does not offer',
      variant(uat, (s) => Object.assign(s, { logRetentionDays: 10 })),
      'uat.logRetentionDays',
    ],
    [
      'a validity alarm threshold above the soft threshold',
      variant(prod, (s) => Object.assign(s.alarms, { tokenValiditySeconds: 7200 })),
      'prod.alarms.tokenValiditySeconds: must be below set "prod-advisor"\'s softThresholdSeconds',
    ],
    [
      'a soft threshold too close to the hard floor for the schedule',
      variant(prod, (s) =>
        Object.assign(s.credentialSets[0] ?? {}, {
          refresh: { softThresholdSeconds: 900, hardFloorSeconds: 300 },
        }),
      ),
      'prod.credentialSets[0].refresh.softThresholdSeconds: leaves fewer than 3 scheduled runs',
    ],
    [
      'two sets of one secret (one vendor user), one counting per user and one per token',
      oneSecret(uat, 'user', 'token'),
      'uat.credentialSets[1].quotaScope: "uat-execution" and "uat-advisor" log in with one secret ("token-broker/uat/advisor"), i.e. as one vendor user, but "uat-advisor" counts its quota per user and "uat-execution" per token',
    ],
    [
      'two sets of one secret counting per user with other rateLimits (one budget, two layouts)',
      variant(oneSecret(uat, 'user', 'user'), (s) =>
        Object.assign(s.credentialSets[1] ?? {}, {
          rateLimits: { classes: { reports: [{ limit: 10, windowSeconds: 60 }] } },
        }),
      ),
      'uat.credentialSets[1].rateLimits: "uat-execution" and "uat-advisor" log in with one secret ("token-broker/uat/advisor"), i.e. as one vendor user, and with quotaScope "user" both draw on the user\'s one budget: their rateLimits must be the same (they differ in classes)',
    ],
  ];

  it.each(cases)('refuses %s, naming the stage and the field', (_, input, expected) => {
    const error = stageFailureOf(input);
    expect(error.code).toBe('CONFIGURATION_INVALID');
    expect(error.message).toContain(`invalid stage "${input.name}"`);
    expect(error.message).toContain(expected);
  });

  it('fails the synth of the whole app on one wrong stage, naming it', () => {
    const broken = variant(prod, (s) => Object.assign(s, { account: 'prod-account' }));
    expect(() => createBrokerApp({ stages: [uat, broken], context: SKIP_BUNDLING })).toThrow(
      /invalid stage "prod": prod\.account: a 12-digit AWS account id/,
    );
  });

  it('synthesizes two sets of one secret counting per user alike (one budget), and fails the synth when they differ', () => {
    const alike = oneSecret(uat, 'user', 'user');
    expect(parseStageConfig(alike).credentialSets.map((set) => set.quotaScope)).toEqual(['user', 'user']);
    expect(() => createBrokerApp({ stages: [alike], context: SKIP_BUNDLING })).not.toThrow();
    expect(() =>
      createBrokerApp({ stages: [oneSecret(uat, 'token', 'user')], context: SKIP_BUNDLING }),
    ).toThrow(
      'invalid stage "uat": uat.credentialSets[1].quotaScope: "uat-execution" and "uat-advisor" log in with one secret',
    );
  });

  it('takes a company-sized stage, and refuses one past the limits that replaced the 4 KB environment', () => {
    // What docs/deploying.md promises: 500 consumers in 10 accounts over 100 sets (test/infra-scale.test.ts
    // synthesizes it); 20 accounts without an organization; more with urlAccess.organizationId.
    const large = generateStage({ consumers: 500, sets: MAX_CREDENTIAL_SETS, accounts: 10, name: 'uat' });
    expect(parseStageConfig(large).consumers).toHaveLength(500);
    expect(
      stageFailureOf(generateStage({ consumers: 5, sets: MAX_CREDENTIAL_SETS + 1, name: 'uat' })).message,
    ).toContain(`uat.credentialSets: Too big: expected array to have <=${MAX_CREDENTIAL_SETS} items`);
    const accounts = MAX_URL_ACCOUNTS + 1;
    expect(
      stageFailureOf(generateStage({ consumers: 50, sets: 5, accounts, name: 'uat' })).message,
    ).toContain(`uat.urlAccess.organizationId: consumers and operators are in ${accounts} accounts`);
    const organization = generateStage({
      consumers: 50,
      sets: 5,
      accounts,
      name: 'uat',
      organizationId: 'o-a1b2c3d4e5',
    });
    expect(parseStageConfig(organization).urlAccess.organizationId).toBe('o-a1b2c3d4e5');
    // About 150 bytes a consumer: the document bound (1 MiB) is far past 500 consumers, and it holds.
    const huge = generateStage({ consumers: 8000, sets: 10, accounts: 1, name: 'uat' });
    expect(stageFailureOf(huge).message).toMatch(
      new RegExp(
        `uat\\.consumers: the vend function's configuration document would take \\d+ bytes; at most ${MAX_CONFIG_DOCUMENT_BYTES}`,
      ),
    );
  });
});

describe('configuration handed to the functions', () => {
  it('writes every setting out, defaults and custom ones, exactly as the functions’ own parsers read them', () => {
    const custom = variant(prod, (s) => {
      Object.assign(s.credentialSets[1] ?? {}, {
        refresh: { softThresholdSeconds: 5400 },
        rateLimits: { classes: { reports: [{ limit: 10, windowSeconds: 60 }] } },
      });
    });
    const stage = parseStageConfig(custom);
    const { vend, refresher } = functionConfigDocuments(stage);
    const [first, second] = vend.credentialSets as CredentialSetConfig[];
    expect(first?.refresh).toEqual(parseCredentialSets([{ ...first, refresh: undefined }])[0]?.refresh);
    expect(second?.refresh.softThresholdSeconds).toBe(5400);
    expect(second?.rateLimits.classes).toEqual({ reports: [{ limit: 10, windowSeconds: 60 }] });
    expect(parseBrokerConfig(vend, 'vend').sets).toEqual(
      stage.credentialSets.map(({ secretName, ...set }) => ({ ...set, secretId: secretName })),
    );
    expect(refresher.credentialSets).toEqual(vend.credentialSets);
    expect(() => verifyBrokerConfig(vend, 'vend')).not.toThrow();
    // A document the parsers would read differently (a default missing) is refused at synth.
    const { refresh: _dropped, ...withoutRefresh } = first as CredentialSetConfig;
    expect(() =>
      verifyBrokerConfig({ ...vend, credentialSets: [withoutRefresh, second] }, 'stage "prod"'),
    ).toThrow(
      `stage "prod": the functions' parsers read the configuration document differently from how it is written`,
    );
  });
});

describe('stage selection', () => {
  it('builds every stage by default, each in its own account and Region', () => {
    const { stacks } = createBrokerApp({ context: SKIP_BUNDLING });
    expect(stacks.map((s) => [s.stackName, s.account, s.region])).toEqual([
      ['TokenBroker-uat', '111111111111', 'eu-west-1'],
      ['TokenBroker-prod', '222222222222', 'eu-west-1'],
    ]);
    expect(stacks.map((s) => s.terminationProtection)).toEqual([false, true]);
  });

  it('builds only the stage named by -c stage=<name>', () => {
    const { stacks } = createBrokerApp({ context: { ...SKIP_BUNDLING, stage: 'prod' } });
    expect(stacks.map((s) => s.stackName)).toEqual(['TokenBroker-prod']);
  });

  it('refuses an unknown stage name, listing the known ones', () => {
    expect(() => createBrokerApp({ context: { ...SKIP_BUNDLING, stage: 'staging' } })).toThrow(
      'unknown stage "staging"; known: uat, prod',
    );
  });
});
