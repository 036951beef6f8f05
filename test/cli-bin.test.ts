import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../shared/clock.js';
import { tokenId } from '../shared/vendor-client/token-id.js';
import { type CliBroker, SANDBOX_PASSWORDS, startCliBroker } from './support/cli-harness.js';

/**
 * The package's bin as a pipeline runs it: `node bin/token-broker.mjs …` in a child process (Node 24 from the
 * project), against the local broker on the real clock. What counts here is what a script sees: stdout,
 * stderr and the exit code.
 */
interface Run {
  exit: number;
  stdout: string;
  stderr: string;
}

function bin(args: string[], env: NodeJS.ProcessEnv = {}, stdin?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ['bin/token-broker.mjs', ...args],
      // Only what the test gives: no AWS settings of the machine running the tests.
      { env: { PATH: process.env.PATH, HOME: '/nonexistent', ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const exit = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ exit, stdout, stderr });
      },
    );
    child.stdin?.end(stdin ?? '');
  });
}

let b: CliBroker;
beforeAll(async () => {
  b = await startCliBroker({ clock: systemClock });
  await b.broker.refreshNow();
}, 30_000);
afterAll(async () => {
  await b?.close();
});

describe('bin/token-broker.mjs', () => {
  it('token: stdout is exactly the token and a newline, for $(…) in scripts; exit 0', async () => {
    const run = await bin(['token', 'uat-advisor'], b.env);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+\n$/);
    expect(run.stderr).toContain(`token ${tokenId(run.stdout.trim())}`);
    expect(run.stderr).not.toContain(run.stdout.trim());
  });

  it('status: the table on stdout, exit 0', async () => {
    const run = await bin(['status'], b.env);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout.split('\n')[0]).toMatch(/^SET\s+STATE\s+EXPIRES IN\s+AGE\s+QUOTA USED\s+CAUSE$/);
    expect(run.stdout).toMatch(/^uat-advisor\s+HEALTHY\s+3h 59m\s+/m);
    for (const secret of SANDBOX_PASSWORDS) expect(run.stdout + run.stderr).not.toContain(secret);
  });

  it('exit codes: 1 with the broker’s code, 2 for usage, 3 when unreachable or refused', async () => {
    const unknown = await bin(['token', 'no-such-set'], b.env);
    expect(unknown.exit).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^token-broker token: error RESOURCE_NOT_FOUND: /,
    );

    const usage = await bin(['token'], b.env);
    expect(usage.exit).toBe(2);
    expect(usage.stderr).toContain('error USAGE_ERROR: missing the credential set id');

    const nothing = await bin([]);
    expect(nothing.exit).toBe(2);
    expect(nothing.stderr).toContain('Usage: token-broker <command>');

    const unreachable = await bin(['status', '--url', 'http://127.0.0.1:9'], b.env);
    expect(unreachable.exit).toBe(3);
    expect(unreachable.stderr).toContain('error BROKER_UNREACHABLE');

    const noCredentials = await bin(['status'], {
      TOKEN_BROKER_URL: b.broker.vendUrl,
      AWS_REGION: 'local',
      // No instance metadata here: the default chain ends at once.
      AWS_EC2_METADATA_DISABLED: 'true',
    });
    expect(noCredentials.exit).toBe(3);
    expect(noCredentials.stderr).toContain('error NO_AWS_CREDENTIALS');
  });

  it('check-config: exit 0 for a valid stage, 2 for an invalid one', async () => {
    const valid = await bin(['check-config', 'prod']);
    expect(valid.exit, valid.stderr).toBe(0);
    expect(valid.stdout).toContain('stage prod: valid');
    const strict = await bin(['check-config', 'prod', '--strict']);
    expect(strict.exit).toBe(2);
  });

  it('--version and version: the package’s version and the checkout’s commit, on stdout; exit 0', async () => {
    const { version } = JSON.parse(readFileSync('packaging/cli.package.json', 'utf8')) as { version: string };
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    for (const argv of [['--version'], ['version']]) {
      const run = await bin(argv);
      expect(run, argv[0]).toEqual({
        exit: 0,
        stdout: `token-broker ${version} (commit ${commit})\n`,
        stderr: '',
      });
    }
    const extra = await bin(['version', 'now']);
    expect(extra).toMatchObject({ exit: 2, stdout: '' });
    expect(extra.stderr).toContain('error USAGE_ERROR: version takes no arguments');
  });

  it('a misspelt command: "did you mean", exit 2', async () => {
    const run = await bin(['stauts']);
    expect(run).toMatchObject({ exit: 2, stdout: '' });
    expect(run.stderr).toBe(
      'token-broker: error USAGE_ERROR: unknown command "stauts"; did you mean "status"? (see "token-broker --help")\n',
    );
  });

  it('--help: the overview with the exit codes, and each command’s usage', async () => {
    const main = await bin(['--help']);
    expect(main.exit).toBe(0);
    expect(main.stdout).toContain('Exit codes:');
    expect(main.stdout).toContain('  version                print the CLI');
    expect(main.stdout).toMatch(/^ {2}4 {2}status: .* DEGRADED/m);
    expect(main.stdout).toMatch(/^ {2}5 {2}status: .* has no token/m);
    for (const command of ['token', 'status', 'check-config', 'put-credentials']) {
      expect(main.stdout).toContain(`  ${command} `);
      const help = await bin([command, '--help']);
      expect(help.exit, command).toBe(0);
      expect(help.stdout, command).toMatch(new RegExp(`^Usage: token-broker ${command} `));
    }
  });

  it('put-credentials: reads piped stdin and sends it to Secrets Manager through the real SDK, printing none of it', async () => {
    const received: { target: string | undefined; body: Record<string, unknown> }[] = [];
    // A stand-in for the Secrets Manager endpoint (AWS_ENDPOINT_URL_SECRETS_MANAGER): its JSON protocol.
    const server: Server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => {
        received.push({
          target: request.headers['x-amz-target'] as string | undefined,
          body: JSON.parse(body),
        });
        response.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
        response.end(
          JSON.stringify({
            ARN: 'arn:aws:secretsmanager:eu-west-1:111111111111:secret:x',
            Name: 'x',
            VersionId: 'v-77',
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const password = 'pipe-only password 42';
      const run = await bin(
        ['put-credentials', 'uat-advisor', '--stage', 'uat'],
        {
          AWS_ACCESS_KEY_ID: 'AKIAEXAMPLEPIPELINE1',
          AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
          AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        },
        `advisor-user\n${password}\n`,
      );
      expect(run.exit, run.stderr).toBe(0);
      expect(received).toEqual([
        {
          // The stage's resource policy first, then the value (test/cli-secret-policy.test.ts).
          target: 'secretsmanager.PutResourcePolicy',
          body: expect.objectContaining({ SecretId: 'token-broker/uat/advisor', BlockPublicPolicy: true }),
        },
        {
          target: 'secretsmanager.PutSecretValue',
          body: expect.objectContaining({
            SecretId: 'token-broker/uat/advisor',
            SecretString: JSON.stringify({ username: 'advisor-user', password }),
          }),
        },
      ]);
      expect(run.stderr).toContain('(version v-77)');
      expect(run.stdout + run.stderr).not.toContain(password);
    } finally {
      server.close();
    }
  });
});
