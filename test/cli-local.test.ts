import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import { BrokerClient } from '../client/broker-client.js';
import { ManualClock } from '../shared/clock.js';
import { tokenId } from '../shared/vendor-client/token-id.js';
import {
  type CliBroker,
  cliBrokerPerFile,
  PORTFOLIO,
  REPORTING,
  runIn,
  SANDBOX_PASSWORDS,
} from './support/cli-harness.js';

/** The CLI in process against the local broker (SigV4, dynalite, sandboxes), on the broker's ManualClock. */
let b: CliBroker;
let clock: ManualClock;
const cli = (argv: string[], env: NodeJS.ProcessEnv = b.env) => runIn(argv, { env, clock });

cliBrokerPerFile((started) => {
  b = started;
  clock = started.clock as ManualClock;
});

function expectNoSecrets(text: string): void {
  for (const password of SANDBOX_PASSWORDS) expect(text).not.toContain(password);
  expect(text).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
}

describe('a 403 from the Function URL (AWS refused the signature, before the broker)', () => {
  const FORBIDDEN_LINE =
    'error FORBIDDEN: the Function URL refused the signature: check the Region, the access keys and the clock (and that this principal may call lambda:InvokeFunctionUrl) (HTTP 403)';

  it.each([
    ['a wrong secret key', ['status'], { AWS_SECRET_ACCESS_KEY: 'not-the-secret-of-this-key' }],
    ['an unknown access key', ['token', 'uat-advisor'], { AWS_ACCESS_KEY_ID: 'AKIANOSUCHKEY0000001' }],
    ['a signature for another Region', ['status', '--region', 'eu-west-1'], {}],
  ] as const)('%s: one line that says what to check, with the code; exit 3', async (_, argv, env) => {
    const run = await cli([...argv], { ...b.env, ...env });
    expect(run).toMatchObject({ exit: 3, stdout: '' });
    expect(run.stderr.trimEnd().split('\n').at(-1)).toBe(`token-broker ${argv[0]}: ${FORBIDDEN_LINE}`);
    expect(run.stderr).not.toContain(PORTFOLIO.AWS_SECRET_ACCESS_KEY);
  });

  it('a clock 20 minutes off: the same line', async () => {
    const late = new ManualClock(clock.now() + 20 * 60_000);
    const run = await runIn(['status'], { env: b.env, clock: late });
    expect(run.exit).toBe(3);
    expect(run.stderr.trimEnd().split('\n').at(-1)).toBe(`token-broker status: ${FORBIDDEN_LINE}`);
  });
});

describe('token-broker token', () => {
  it('prints only the token on stdout: a token of the set, valid at the vendor sandbox', async () => {
    const run = await cli(['token', 'uat-advisor']);
    expect(run.exit).toBe(0);
    expect(run.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const token = run.stdout.trim();
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ env: 'uat', username: 'uat-advisor' });
    // Progress on stderr names the set and the token id, never the token. A second under 4 h: the broker takes the
    // vendor's clock as far ahead as its Date (whole seconds) allows.
    expect(run.stderr).toContain(`uat-advisor (uat) token ${tokenId(token)}, expires in 3h 59m`);
    expectNoSecrets(run.stderr);
    const answer = await fetch(`${b.broker.sandboxes.uat?.url}/users/1/uat-advisor-tenant/serviceKey/none`, {
      headers: { authorization: `Bearer ${token}` },
    });
    // The sandbox accepts the token (404: no such resource), where a bad one would be 401.
    expect(answer.status).toBe(404);
  });

  it('--json prints the whole answer, with the token, its id, expiry and the login fields', async () => {
    const run = await cli(['token', 'prod-execution', '--json']);
    expect(run.exit).toBe(0);
    const body = JSON.parse(run.stdout);
    expect(body).toMatchObject({
      credentialSet: 'prod-execution',
      environment: 'prod',
      tokenId: tokenId(body.accessToken),
      expiresAt: decodeJwt(body.accessToken).exp,
      tenant: 'prod-execution-tenant',
      companyKey: 'CMP-PROD-EXECUTION',
    });
    // Less the second of the vendor's Date, taken as passed.
    expect(body.expiresInSeconds).toBe(body.expiresAt - Math.floor(clock.now() / 1000) - 1);
  });

  it('--min-validity asks the broker for that much: more than the token has forces one re-login', async () => {
    const before = (await cli(['token', 'uat-execution'])).stdout.trim();
    // 3 h 20 min later the token has 40 min left, under its soft threshold (a fifth of its 4 h, or a little
    // less): 2300 s are still there, 2600 s are not.
    await clock.advance((3 * 3600 + 1200) * 1000);
    const same = await cli(['token', 'uat-execution', '--min-validity', '2300']);
    expect(same.stdout.trim()).toBe(before);
    const logins = b.broker.sandboxes.uat?.stats().logins['uat-execution']?.successes ?? 0;
    const fresh = await cli(['token', 'uat-execution', '--min-validity', '2600']);
    expect(fresh.exit).toBe(0);
    expect(fresh.stdout.trim()).not.toBe(before);
    expect(decodeJwt(fresh.stdout.trim()).exp).toBeGreaterThan(Math.floor(clock.now() / 1000) + 2600);
    expect(b.broker.sandboxes.uat?.stats().logins['uat-execution']?.successes).toBe(logins + 1);
    // The schedule's run renews the other sets, now inside their soft threshold.
    await b.broker.refreshNow();
  });

  it('fails with exit 1 and the broker’s error code: unknown set, set of another consumer, too much validity', async () => {
    const unknown = await cli(['token', 'no-such-set']);
    expect(unknown).toMatchObject({ exit: 1, stdout: '' });
    expect(unknown.stderr).toMatch(
      /^token-broker token: error RESOURCE_NOT_FOUND: .*\(HTTP 404\) \(broker requestId [\w-]+\)$/m,
    );

    const forbidden = await cli(['token', 'prod-advisor'], { ...b.env, ...REPORTING });
    expect(forbidden).toMatchObject({ exit: 1, stdout: '' });
    expect(forbidden.stderr).toContain('error INSUFFICIENT_PERMISSIONS');
  });

  it('names the option typed, not the broker’s field, when the broker refuses its value (exit 2)', async () => {
    const greedy = await cli(['token', 'uat-advisor', '--min-validity', '99999']);
    expect(greedy).toMatchObject({ exit: 2, stdout: '' });
    expect(greedy.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^token-broker token: error USAGE_ERROR: --min-validity must be at most \d+ \(the broker refused it: INVALID_VALUE\) \(see "token-broker token --help"\)$/,
    );
    expect(greedy.stderr).not.toContain('minValiditySeconds');
  });

  it('exits 3 when the broker is unreachable or refuses the signature, 2 for usage errors', async () => {
    const wrongKey = await cli(['token', 'uat-advisor'], {
      ...b.env,
      AWS_SECRET_ACCESS_KEY: 'not-the-secret-of-this-key',
    });
    expect(wrongKey).toMatchObject({ exit: 3, stdout: '' });
    expect(wrongKey.stderr).toContain('error FORBIDDEN');

    const closedPort = await runIn(['status', '--url', 'http://127.0.0.1:9'], { env: b.env });
    expect(closedPort.exit).toBe(3);
    expect(closedPort.stderr).toContain('error BROKER_UNREACHABLE');

    const usage: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [
        ['token', 'uat-advisor'],
        { AWS_REGION: 'local', ...PORTFOLIO },
        /no broker URL: give --url or --stage, or set TOKEN_BROKER_URL/,
      ],
      [['token', 'uat-advisor', '--url', 'http://broker.example.com'], b.env, /https:\/\//],
      [['token', 'uat-advisor', '--min-validity', '5m'], b.env, /--min-validity must be a whole number/],
      [['token'], b.env, /missing the credential set id/],
      [['token', 'a', 'b'], b.env, /too many arguments/],
      [['token', 'Not_A_Set'], b.env, /not a credential set id/],
      [['token', 'uat-advisor', '--verbose'], b.env, /unknown option --verbose/],
      [['frobnicate'], b.env, /unknown command "frobnicate"; commands: token, status, /],
      [['stauts'], b.env, /unknown command "stauts"; did you mean "status"\?/],
      [['chek-config', 'uat'], b.env, /unknown command "chek-config"; did you mean "check-config"\?/],
      [['status', '--wdie'], b.env, /unknown option --wdie; did you mean --wide\?/],
      [
        ['token', 'uat-advisor', '--min-valdity', '60'],
        b.env,
        /unknown option --min-valdity; did you mean --min-validity\?/,
      ],
      [['token', 'uat-advisor', '-x'], b.env, /unknown option -x \(known: --help, --url, /],
    ];
    for (const [argv, env, message] of usage) {
      const run = await cli(argv, env);
      expect(run.exit, argv.join(' ')).toBe(2);
      expect(run.stdout, argv.join(' ')).toBe('');
      expect(run.stderr, argv.join(' ')).toMatch(message);
      expect(run.stderr, argv.join(' ')).toMatch(/error USAGE_ERROR: .*\(see "token-broker .*--help"\)\n$/);
    }
  });
});

describe('token-broker status', () => {
  it('shows every set the caller may see, with expiry, last refresh and the quota used per window', async () => {
    const client = new BrokerClient({
      brokerUrl: b.broker.vendUrl,
      region: 'local',
      credentials: {
        accessKeyId: PORTFOLIO.AWS_ACCESS_KEY_ID,
        secretAccessKey: PORTFOLIO.AWS_SECRET_ACCESS_KEY,
      },
      clock,
    });
    const token = await client.getToken('prod-advisor');
    for (let i = 0; i < 3; i++) await client.acquirePermit('prod-advisor', token.tokenId);
    // Unused permits of the client's batches go back: the ledger counts the 3 used.
    await client.close();
    await clock.advance(2000);

    const run = await cli(['status', '--wide']);
    expect(run.exit).toBe(0);
    // The sets table: the first section (a CLASSES section follows for sets with request classes).
    const lines = (run.stdout.trim().split('\n\n')[0] ?? '').split('\n');
    expect(lines[0]).toMatch(
      /^SET\s+ENV\s+STATE\s+EXPIRES IN\s+LAST REFRESH\s+LAST ERROR\s+VENDOR REQUEST ID\s+NEXT ATTEMPT\s+QUOTA USED\s+CAUSE$/,
    );
    expect(lines.slice(1).map((line) => line.split(/\s+/)[0])).toEqual([
      'uat-advisor',
      'uat-execution',
      'prod-advisor',
      'prod-execution',
    ]);
    const prod = lines.find((line) => line.startsWith('prod-advisor')) ?? '';
    expect(prod).toMatch(/^prod-advisor\s+prod\s+HEALTHY\s+/);
    expect(prod).toContain('3/50 per 1m, 3/1000 per 1h');
    expect(prod).toMatch(/\s+ok$/);
    expectNoSecrets(run.stdout + run.stderr);

    const json = JSON.parse((await cli(['status', 'prod-advisor', '--json'])).stdout);
    expect(json.at).toBe(new Date(clock.now()).toISOString());
    expect(json.credentialSets).toHaveLength(1);
    const set = json.credentialSets[0];
    expect(set).toMatchObject({
      id: 'prod-advisor',
      environment: 'prod',
      companyRole: 'advisor',
      state: 'HEALTHY',
      expiresAt: token.expiresAt,
      expiresInSeconds: token.expiresAt - Math.floor(clock.now() / 1000) - 1,
      lastError: null,
      consecutiveFailures: 0,
      nextAttemptAt: null,
      rateLimitedUntil: null,
      quota: [
        { limit: 50, windowSeconds: 60, used: 3, remaining: 47 },
        { limit: 1000, windowSeconds: 3600, used: 3, remaining: 997 },
      ],
      causes: [{ code: null, summary: 'ok', runbook: null }],
    });
    expect(Date.parse(set.refreshedAt)).toBeLessThanOrEqual(clock.now());
  });

  it('lists only the caller’s sets, and says which named set it may not see', async () => {
    const reporting = { ...b.env, ...REPORTING };
    const run = await cli(['status', '--json'], reporting);
    expect(JSON.parse(run.stdout).credentialSets.map((s: { id: string }) => s.id)).toEqual(['uat-advisor']);
    const other = await cli(['status', 'prod-advisor'], reporting);
    expect(other.exit).toBe(1);
    expect(other.stderr).toContain('error RESOURCE_NOT_FOUND: not among the sets you may see: prod-advisor');
  });
});
