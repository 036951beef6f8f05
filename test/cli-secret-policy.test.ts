import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateSecretCommand,
  GetResourcePolicyCommand,
  GetSecretValueCommand,
  PutResourcePolicyCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { StageInput } from '../infra/stage-config.js';
import { prod } from '../infra/stages/prod.js';
import { runIn } from './support/cli-harness.js';

/**
 * The vendor secrets' resource policy: put by `put-credentials` before every value, reported by
 * `check-config --secrets`, printed by `secret-policy`. Secrets Manager has no local stand-in:
 * aws-sdk-client-mock answers for it, and records every call in order.
 */
const secrets = mockClient(SecretsManagerClient);
const PASSWORD = 'n0t-in-any-output ';
const factory = (region: string) =>
  new SecretsManagerClient({ region, credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' } });
const put = (argv: string[]) =>
  runIn(['put-credentials', ...argv], { stdin: `advisor-user\n${PASSWORD}\n`, secretsManager: factory });

/** What uat's secrets must carry, written out by hand (not computed by the code under test). */
const UAT_POLICY = {
  Version: '2012-10-17',
  Statement: [
    {
      Sid: 'OnlyTheRefresherAndBreakGlassReadTheValue',
      Effect: 'Deny',
      Principal: '*',
      Action: ['secretsmanager:GetSecretValue'],
      Resource: '*',
      Condition: {
        StringNotEquals: {
          'aws:PrincipalArn': [
            'arn:aws:iam::111111111111:role/token-broker-uat-refresher',
            'arn:aws:iam::111111111111:role/token-broker-break-glass-uat',
          ],
        },
      },
    },
  ],
};

const notFound = () =>
  new ResourceNotFoundException({
    message: "Secrets Manager can't find the specified secret.",
    $metadata: {},
  });
const denied = (action: string) =>
  new SecretsManagerServiceException({
    name: 'AccessDeniedException',
    $fault: 'client',
    $metadata: { httpStatusCode: 400 },
    message: `User: arn:aws:sts::111111111111:assumed-role/dev/me is not authorized to perform: ${action}`,
  });

/** Every Secrets Manager call in order: its command name, and whether it carried the password. */
const sequence = () =>
  secrets.calls().map((call) => {
    const command = call.args[0] as { constructor: { name: string }; input: unknown };
    return `${command.constructor.name.replace(/Command$/, '')}${JSON.stringify(command.input).includes(PASSWORD.trim()) ? ' (value)' : ''}`;
  });
const policyCalls = () => secrets.commandCalls(PutResourcePolicyCommand).map((c) => c.args[0].input);

beforeEach(() => {
  secrets.reset();
  secrets.on(PutResourcePolicyCommand).resolves({});
  secrets.on(PutSecretValueCommand).resolves({ VersionId: 'v-0002' });
  secrets.on(CreateSecretCommand).resolves({});
});

describe('put-credentials keeps the resource policy', () => {
  it('puts the stage’s policy (BlockPublicPolicy) on an existing secret before the new value, and says so', async () => {
    const run = await put(['uat-advisor', '--stage', 'uat']);
    expect(run.exit, run.stderr).toBe(0);
    expect(sequence()).toEqual(['PutResourcePolicy', 'PutSecretValue (value)']);
    const [call] = policyCalls();
    expect(call?.SecretId).toBe('token-broker/uat/advisor');
    expect(call?.BlockPublicPolicy).toBe(true);
    expect(JSON.parse(call?.ResourcePolicy ?? 'null')).toEqual(UAT_POLICY);
    expect(run.stderr).toContain(
      'put the resource policy on secret "token-broker/uat/advisor" before its value: only arn:aws:iam::111111111111:role/token-broker-uat-refresher, arn:aws:iam::111111111111:role/token-broker-break-glass-uat may read it',
    );
    expect(run.stdout + run.stderr).not.toContain(PASSWORD.trim());
  });

  it('--create: creates the secret without a value, puts the policy, and only then the value', async () => {
    secrets.on(PutResourcePolicyCommand).rejectsOnce(notFound()).resolves({});
    const run = await put(['uat-advisor', '--stage', 'uat', '--create']);
    expect(run.exit, run.stderr).toBe(0);
    // The value is stored only once the policy is on the secret: never readable by others, not for a moment.
    expect(sequence()).toEqual([
      'PutResourcePolicy',
      'CreateSecret',
      'PutResourcePolicy',
      'PutSecretValue (value)',
    ]);
    expect(secrets.commandCalls(CreateSecretCommand)[0]?.args[0].input).toEqual({
      Name: 'token-broker/uat/advisor',
      Description: 'token-broker: vendor credentials of credential set uat-advisor',
    });
    for (const call of policyCalls()) {
      expect(JSON.parse(call.ResourcePolicy ?? 'null')).toEqual(UAT_POLICY);
      expect(call.BlockPublicPolicy).toBe(true);
    }
    expect(run.stderr).toContain('created secret "token-broker/uat/advisor" (version v-0002)');
  });

  it('writes no value when the policy cannot be put (exit 3 for a refusal of who we are)', async () => {
    secrets.on(PutResourcePolicyCommand).rejects(denied('secretsmanager:PutResourcePolicy'));
    const run = await put(['uat-advisor', '--stage', 'uat']);
    expect(run.exit).toBe(3);
    expect(run.stderr).toContain(
      'error AccessDeniedException: Secrets Manager refused to put the resource policy on "token-broker/uat/advisor"',
    );
    expect(sequence()).toEqual(['PutResourcePolicy']);

    // Created, then the policy refused: the secret stays without a value, and the message says what to do.
    secrets.reset();
    secrets.on(CreateSecretCommand).resolves({});
    secrets
      .on(PutResourcePolicyCommand)
      .rejectsOnce(notFound())
      .rejects(denied('secretsmanager:PutResourcePolicy'));
    const created = await put(['uat-advisor', '--stage', 'uat', '--create']);
    expect(created.exit).toBe(3);
    expect(sequence()).toEqual(['PutResourcePolicy', 'CreateSecret', 'PutResourcePolicy']);
    expect(created.stderr).toContain(
      'the secret was created without a value and no value was written; run put-credentials again (without --create)',
    );
    for (const r of [run, created]) expect(r.stdout + r.stderr).not.toContain(PASSWORD.trim());
  });

  it('with --secret-id (no stage) puts no policy and says so', async () => {
    const run = await put(['uat-advisor', '--secret-id', 'custom/advisor', '--region', 'eu-west-1']);
    expect(run.exit, run.stderr).toBe(0);
    expect(sequence()).toEqual(['PutSecretValue (value)']);
    expect(run.stderr).toContain("no stage given: the secret's resource policy is neither put nor checked");
  });
});

const dir = mkdtempSync(join(tmpdir(), 'cli-secret-policy-'));
/** A prod stage as a real team would have it (no placeholder warnings), in a JSON file. */
function realisticProd(): { path: string; stage: StageInput } {
  const stage = structuredClone(prod) as StageInput & Record<string, unknown>;
  Object.assign(stage, {
    account: '123456789012',
    credentialSets: stage.credentialSets.map((set) => ({
      ...set,
      vendorBaseUrl: 'https://api.pms-vendor.com',
    })),
    consumers: [
      {
        name: 'portfolio-service',
        principalArn: 'arn:aws:iam::123456789012:role/portfolio-service',
        credentialSets: ['prod-advisor'],
      },
    ],
    operators: [{ name: 'oncall', principalArn: 'arn:aws:iam::123456789012:role/oncall' }],
    breakGlassPrincipals: ['arn:aws:iam::123456789012:role/security/break-glass'],
    alarms: { emails: ['token-broker-oncall@corp.invalid'] },
    runbookUrl: 'https://git.corp.invalid/platform/token-broker/blob/main/docs/runbook.md',
  });
  const path = join(dir, 'prod.json');
  writeFileSync(path, JSON.stringify(stage));
  return { path, stage };
}
const PROD_READERS = [
  'arn:aws:iam::123456789012:role/token-broker-prod-refresher',
  'arn:aws:iam::123456789012:role/security/break-glass',
];
/** The right policy, as Secrets Manager might hand it back: other Sid, `{"AWS": "*"}`, plain strings, other order. */
const RIGHT_AS_STORED = JSON.stringify({
  Version: '2012-10-17',
  Statement: [
    {
      Sid: 'Stored',
      Effect: 'Deny',
      Principal: { AWS: '*' },
      Action: 'secretsmanager:GetSecretValue',
      Resource: '*',
      Condition: { StringNotEquals: { 'aws:PrincipalArn': [...PROD_READERS].reverse() } },
    },
  ],
});
const policyOf = (secretId: string, text: string | undefined) =>
  secrets
    .on(GetResourcePolicyCommand, { SecretId: secretId })
    .resolves({ Name: secretId, ...(text ? { ResourcePolicy: text } : {}) });

describe('check-config --secrets', () => {
  it('passes --strict when every secret carries the stage’s policy (in whatever equivalent form)', async () => {
    const { path } = realisticProd();
    policyOf('token-broker/prod/advisor', RIGHT_AS_STORED);
    policyOf('token-broker/prod/execution-platform', RIGHT_AS_STORED);
    const run = await runIn(['check-config', path, '--strict', '--secrets'], { secretsManager: factory });
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('warning');
    expect(run.stdout).toContain(
      `secret readers: ${PROD_READERS[0]} (refresher), ${PROD_READERS[1]} (break-glass)`,
    );
    expect(run.stdout).toContain("secrets' resource policies: checked in Secrets Manager");
    expect(secrets.commandCalls(GetResourcePolicyCommand).map((c) => c.args[0].input.SecretId)).toEqual([
      'token-broker/prod/advisor',
      'token-broker/prod/execution-platform',
    ]);
    expect(secrets.commandCalls(GetSecretValueCommand)).toEqual([]);
  });

  it('reports a secret without the policy and one with a drifted policy, naming each (an error under --strict)', async () => {
    const { path } = realisticProd();
    policyOf('token-broker/prod/advisor', undefined);
    const drifted = JSON.parse(RIGHT_AS_STORED);
    drifted.Statement[0].Condition.StringNotEquals['aws:PrincipalArn'].push(
      'arn:aws:iam::123456789012:role/some-admin',
    );
    policyOf('token-broker/prod/execution-platform', JSON.stringify(drifted));
    const lenient = await runIn(['check-config', path, '--secrets'], { secretsManager: factory });
    expect(lenient.exit, lenient.stderr).toBe(0);
    const warnings = lenient.stderr.split('\n').filter((line) => line.startsWith('warning: '));
    expect(warnings).toEqual([
      'warning: prod.credentialSets[0].secretName: secret "token-broker/prod/advisor" has no resource policy: any principal of the account allowed secretsmanager:GetSecretValue reads it; "token-broker put-credentials prod-advisor --stage prod" puts it (docs/deploying.md)',
      'warning: prod.credentialSets[1].secretName: secret "token-broker/prod/execution-platform" has a resource policy other than the stage\'s ("token-broker secret-policy prod" prints the stage\'s); "token-broker put-credentials prod-execution --stage prod" puts it (docs/deploying.md)',
    ]);
    const strict = await runIn(['check-config', path, '--secrets', '--strict', '--json'], {
      secretsManager: factory,
    });
    expect(strict.exit).toBe(2);
    const report = JSON.parse(strict.stdout);
    expect(report).toMatchObject({ valid: false, errors: [] });
    expect(report.warnings.map((w: { field: string }) => w.field)).toEqual([
      'prod.credentialSets[0].secretName',
      'prod.credentialSets[1].secretName',
    ]);
    expect(strict.stderr).toMatch(/stage "prod" is not valid: 2 warning\(s\) \(--strict\)\n$/);
  });

  it('reports a missing secret and an unreadable policy; without --secrets it asks AWS nothing', async () => {
    const { path } = realisticProd();
    secrets.on(GetResourcePolicyCommand, { SecretId: 'token-broker/prod/advisor' }).rejects(notFound());
    secrets
      .on(GetResourcePolicyCommand, { SecretId: 'token-broker/prod/execution-platform' })
      .rejects(denied('secretsmanager:GetResourcePolicy'));
    const run = await runIn(['check-config', path, '--secrets', '--json'], { secretsManager: factory });
    expect(JSON.parse(run.stdout).warnings).toEqual([
      {
        field: 'prod.credentialSets[0].secretName',
        message:
          'secret "token-broker/prod/advisor" does not exist in eu-west-1; "token-broker put-credentials prod-advisor --stage prod --create" creates it with its resource policy',
      },
      {
        field: 'prod.credentialSets[1].secretName',
        message:
          'the resource policy of secret "token-broker/prod/execution-platform" could not be read (AccessDeniedException)',
      },
    ]);
    let clients = 0;
    const offline = await runIn(['check-config', path, '--strict'], {
      secretsManager: (region) => {
        clients++;
        return factory(region);
      },
    });
    expect(offline.exit, offline.stderr).toBe(0);
    expect(clients).toBe(0);
    // The offline answer says what it did not check, and how to.
    expect(offline.stdout).toContain("secrets' resource policies: not checked (offline); --secrets asks");
  });
});

describe('token-broker secret-policy', () => {
  it('prints the stage’s document on stdout and the AWS CLI command per secret on stderr', async () => {
    const run = await runIn(['secret-policy', 'uat']);
    expect(run.exit, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(UAT_POLICY);
    for (const name of ['token-broker/uat/advisor', 'token-broker/uat/execution-platform']) {
      expect(run.stderr).toContain(
        `aws secretsmanager put-resource-policy --region eu-west-1 --secret-id ${name} --resource-policy file://policy.json --block-public-policy`,
      );
    }
    const unknown = await runIn(['secret-policy', 'staging']);
    expect(unknown.exit).toBe(2);
  });
});
