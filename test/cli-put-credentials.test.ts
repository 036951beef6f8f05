import { PassThrough } from 'node:stream';
import {
  CreateSecretCommand,
  PutResourcePolicyCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { CliInput } from '../cli/io.js';
import { runIn } from './support/cli-harness.js';

/** Secrets Manager has no local stand-in: aws-sdk-client-mock answers for it. Everything else is real. */
const secrets = mockClient(SecretsManagerClient);
const PASSWORD = 'Tr0ub4dor&3 with spaces ';
const regions: string[] = [];
const factory = (region: string) => {
  regions.push(region);
  return new SecretsManagerClient({
    region,
    credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' },
  });
};
const put = (argv: string[], stdin: string | CliInput, env: NodeJS.ProcessEnv = {}) =>
  runIn(['put-credentials', ...argv], { stdin, env, secretsManager: factory });

beforeEach(() => {
  secrets.reset();
  regions.length = 0;
  secrets.on(PutSecretValueCommand).resolves({ VersionId: 'v-0002' });
});

const written = () => secrets.commandCalls(PutSecretValueCommand).map((call) => call.args[0].input);
function expectQuiet(run: { stdout: string; stderr: string }): void {
  expect(run.stdout + run.stderr).not.toContain(PASSWORD);
  expect(run.stdout + run.stderr).not.toContain(PASSWORD.trim());
}

describe('token-broker put-credentials', () => {
  it('writes two piped lines as a new version of the secret the stage names, in the stage’s Region', async () => {
    const run = await put(['uat-advisor', '--stage', 'uat'], `advisor-user\n${PASSWORD}\n`);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout).toBe('');
    expect(written()).toEqual([
      {
        SecretId: 'token-broker/uat/advisor',
        SecretString: JSON.stringify({ username: 'advisor-user', password: PASSWORD }),
      },
    ]);
    expect(regions).toEqual(['eu-west-1']);
    expect(run.stderr).toContain(
      'wrote a new version of secret "token-broker/uat/advisor" (version v-0002) for uat-advisor',
    );
    expectQuiet(run);
  });

  it('takes the secret’s own JSON shape, --secret-id and --region, and prints --json', async () => {
    const run = await put(
      ['prod-advisor', '--secret-id', 'custom/advisor', '--region', 'eu-central-1', '--json'],
      JSON.stringify({ username: 'u', password: PASSWORD }),
    );
    expect(run.exit, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      credentialSet: 'prod-advisor',
      secretId: 'custom/advisor',
      region: 'eu-central-1',
      versionId: 'v-0002',
      created: false,
    });
    expect(written()[0]?.SecretString).toBe(JSON.stringify({ username: 'u', password: PASSWORD }));
    expect(regions).toEqual(['eu-central-1']);
    expectQuiet(run);
  });

  it('creates a missing secret only with --create; without it, exit 1 saying so', async () => {
    const notFound = new ResourceNotFoundException({
      message: "Secrets Manager can't find the specified secret.",
      $metadata: {},
    });
    // A stage's secret gets its resource policy first: that is the call that finds it missing.
    secrets.on(PutResourcePolicyCommand).rejects(notFound);
    secrets.on(CreateSecretCommand).resolves({});
    const refused = await put(['uat-advisor', '--stage', 'uat'], `u\n${PASSWORD}\n`);
    expect(refused.exit).toBe(1);
    expect(refused.stderr).toMatch(
      /error ResourceNotFoundException: secret "token-broker\/uat\/advisor" does not exist; add --create to create it/,
    );
    expect(secrets.commandCalls(CreateSecretCommand)).toHaveLength(0);

    secrets.reset();
    secrets.on(PutSecretValueCommand).resolves({ VersionId: 'v-0002' });
    secrets.on(CreateSecretCommand).resolves({});
    secrets.on(PutResourcePolicyCommand).rejectsOnce(notFound).resolves({});
    const created = await put(['uat-advisor', '--stage', 'uat', '--create'], `u\n${PASSWORD}\n`);
    expect(created.exit, created.stderr).toBe(0);
    // Created without a value; the value follows its resource policy (test/cli-secret-policy.test.ts).
    expect(secrets.commandCalls(CreateSecretCommand).map((c) => c.args[0].input)).toEqual([
      {
        Name: 'token-broker/uat/advisor',
        Description: 'token-broker: vendor credentials of credential set uat-advisor',
      },
    ]);
    expect(written()).toEqual([
      {
        SecretId: 'token-broker/uat/advisor',
        SecretString: JSON.stringify({ username: 'u', password: PASSWORD }),
      },
    ]);
    expect(created.stderr).toContain('created secret "token-broker/uat/advisor" (version v-0002)');
    expectQuiet(refused);
    expectQuiet(created);
  });

  it("writes a two-Region stage's secret by the stage's name, in home only, never creating it", async () => {
    secrets.on(PutResourcePolicyCommand).resolves({});
    const run = await put(['prod-advisor', '--stage', 'prod-regions'], `u\n${PASSWORD}\n`);
    expect(run.exit, run.stderr).toBe(0);
    expect(regions).toEqual(['eu-west-1']);
    expect(written().map((w) => w.SecretId)).toEqual(['token-broker/prod-regions/advisor']);
    // The policy the global stack puts: both Regions' refreshers (the peer's reads the replica) and break-glass.
    const policy = JSON.stringify(secrets.commandCalls(PutResourcePolicyCommand)[0]?.args[0].input);
    expect(policy).toContain('role/token-broker-prod-regions-refresher');
    expect(policy).toContain('role/token-broker-prod-regions-eu-central-1-refresher');
    expectQuiet(run);

    // The replica takes no write, and the global stack creates the secrets: both refused before any call.
    secrets.reset();
    regions.length = 0;
    const peer = await put(
      ['prod-advisor', '--stage', 'prod-regions', '--region', 'eu-central-1'],
      `u\n${PASSWORD}\n`,
    );
    expect(peer.exit).toBe(2);
    expect(peer.stderr).toContain(
      'stage "prod-regions" has two Regions: its secrets are written in home (eu-west-1), whose primary Secrets Manager replicates to eu-central-1',
    );
    const create = await put(['prod-advisor', '--stage', 'prod-regions', '--create'], `u\n${PASSWORD}\n`);
    expect(create.exit).toBe(2);
    expect(create.stderr).toContain('its secrets are created by the stack TokenBroker-prod-regions-global');
    expect(regions).toEqual([]);
    expect(secrets.calls()).toHaveLength(0);
  });

  it('exits 3 when AWS refuses who we are or cannot be reached, 1 for other refusals', async () => {
    const denied = new SecretsManagerServiceException({
      name: 'AccessDeniedException',
      $fault: 'client',
      $metadata: { httpStatusCode: 400 },
      message:
        'User: arn:aws:sts::111111111111:assumed-role/dev/me is not authorized to perform: secretsmanager:PutSecretValue',
    });
    secrets.on(PutSecretValueCommand).rejects(denied);
    const run = await put(['uat-advisor', '--stage', 'uat'], `u\n${PASSWORD}\n`);
    expect(run.exit).toBe(3);
    expect(run.stderr).toContain(
      'error AccessDeniedException: Secrets Manager refused to write "token-broker/uat/advisor": User: arn:aws:sts',
    );

    secrets
      .on(PutSecretValueCommand)
      .rejects(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    const offline = await put(['uat-advisor', '--stage', 'uat'], `u\n${PASSWORD}\n`);
    expect(offline.exit).toBe(3);
    expect(offline.stderr).toContain('error NETWORK_ERROR: Secrets Manager could not be reached');

    const invalid = new SecretsManagerServiceException({
      name: 'InvalidRequestException',
      $fault: 'client',
      $metadata: { httpStatusCode: 400 },
      message: 'You tried to perform the operation on a secret that is currently marked deleted.',
    });
    secrets.on(PutSecretValueCommand).rejects(invalid);
    const deleted = await put(['uat-advisor', '--stage', 'uat'], `u\n${PASSWORD}\n`);
    expect(deleted.exit).toBe(1);
    expect(deleted.stderr).toContain('error InvalidRequestException');
    for (const r of [run, offline, deleted]) expectQuiet(r);
  });

  it('refuses bad input with exit 2 and writes nothing; a password given as an argument is never echoed', async () => {
    const cases: [string[], string, RegExp][] = [
      [['uat-advisor', '--stage', 'uat'], '', /no credentials on standard input/],
      [['uat-advisor', '--stage', 'uat'], `u\n${PASSWORD}\nextra\n`, /expected two lines .* got 3/],
      [['uat-advisor', '--stage', 'uat'], `\n${PASSWORD}\n`, /wrong: username/],
      [
        ['uat-advisor', '--stage', 'uat'],
        `{"username":"u","password":"${PASSWORD}"`,
        /starts with "\{" but is not valid JSON/,
      ],
      [
        ['uat-advisor', '--stage', 'uat'],
        JSON.stringify({ username: 'u', password: PASSWORD, note: 'x' }),
        /nothing else; wrong: extra fields/,
      ],
      [['uat-advisor'], `u\n${PASSWORD}\n`, /give exactly one of --stage or --secret-id/],
      [
        ['uat-advisor', '--stage', 'uat', '--secret-id', 'x'],
        `u\n${PASSWORD}\n`,
        /give exactly one of --stage or --secret-id/,
      ],
      [
        ['prod-advisor', '--stage', 'uat'],
        `u\n${PASSWORD}\n`,
        /stage "uat" has no credential set "prod-advisor"; its sets: uat-advisor, uat-execution/,
      ],
      [['uat-advisor', '--secret-id', 'x'], `u\n${PASSWORD}\n`, /no Region: give --region or set AWS_REGION/],
      [
        ['uat-advisor', PASSWORD, '--stage', 'uat'],
        '',
        /too many arguments: expected the credential set id, got 2/,
      ],
      [['uat-advisor', `--password=${PASSWORD}`], '', /unknown option --password \(known: /],
    ];
    for (const [argv, stdin, message] of cases) {
      const run = await put(argv, stdin);
      expect(run.exit, argv.join(' ')).toBe(2);
      expect(run.stderr, argv.join(' ')).toMatch(message);
      expectQuiet(run);
    }
    expect(written()).toEqual([]);
  });

  it('on a terminal, prompts with the password hidden (raw mode, no echo) and supports backspace', async () => {
    const modes: boolean[] = [];
    const terminal = Object.assign(new PassThrough(), {
      isTTY: true,
      setRawMode: (mode: boolean) => modes.push(mode),
    });
    // Typed: the username, Enter; the password with a typo fixed by two backspaces, Enter.
    terminal.write('advisor-user\r');
    terminal.write(`${PASSWORD}xx\u007f\u007f\r`);
    const run = await put(['uat-advisor', '--stage', 'uat'], terminal);
    expect(run.exit, run.stderr).toBe(0);
    expect(modes).toEqual([true, false]);
    expect(written()[0]?.SecretString).toBe(JSON.stringify({ username: 'advisor-user', password: PASSWORD }));
    expect(run.stderr).toContain('username for uat-advisor: advisor-user\npassword (not shown): \n');
    expect(run.stderr).not.toContain('xx');
    expectQuiet(run);
  });

  it('Ctrl-C at the prompt cancels: exit 2, terminal restored, nothing written', async () => {
    const modes: boolean[] = [];
    const terminal = Object.assign(new PassThrough(), {
      isTTY: true,
      setRawMode: (m: boolean) => modes.push(m),
    });
    terminal.write('advisor-user\rTr0ub\u0003');
    const run = await put(['uat-advisor', '--stage', 'uat'], terminal);
    expect(run.exit).toBe(2);
    expect(run.stderr).toContain('error CANCELLED: cancelled; nothing was written');
    expect(run.stderr).not.toContain('Tr0ub');
    expect(modes).toEqual([true, false]);
    expect(written()).toEqual([]);
  });
});
