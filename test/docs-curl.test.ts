import { type ChildProcess, execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { startBrokerProcess, stopBrokerProcess } from './support/local-broker-process.js';

/**
 * The curl commands of docs/vend-api.md ("From any language: curl"), run as written with real curl and jq
 * against `npm start`: every status must be the one its `# HTTP` comment says.
 */
const run = promisify(execFile);
const DOC = 'docs/vend-api.md';
const MARKER = '<!-- checked: test/docs-curl.test.ts';
const CALLER = {
  accessKeyId: 'AKIALOCALPORTFOLIO01',
  secretAccessKey: 'local-only-portfolio-service-secret',
};

function documentedBlock(): { script: string; expected: number[] } {
  const doc = readFileSync(DOC, 'utf8');
  const at = doc.indexOf(MARKER);
  if (at < 0) throw new Error(`${DOC}: no block marked "${MARKER}"`);
  const block = /```sh\n([\s\S]*?)\n```/.exec(doc.slice(at));
  if (!block?.[1]) throw new Error(`${DOC}: no \`\`\`sh block after the marker`);
  const expected = [...block[1].matchAll(/# HTTP (\d{3})\b/g)].map((m) => Number(m[1]));
  return { script: block[1], expected };
}

/** The tool's version line, or a failure that says what is missing (never a skip). */
async function tool(name: string, args: string[], why: string): Promise<string> {
  return run(name, args).then(
    ({ stdout }) => stdout.split('\n')[0] ?? '',
    () => {
      throw new Error(
        `${name} is not installed (\`${name} ${args.join(' ')}\` failed): ${why}. ` +
          `Install it: sudo apt-get install -y ${name} (.ci/run does).`,
      );
    },
  );
}

describe('the curl commands in docs/vend-api.md, against npm start', () => {
  let broker: { child: ChildProcess; banner: string };
  let vendUrl: string;
  let brokerLog = '';
  const signer = new FunctionUrlSigner({ region: 'local', credentials: CALLER });

  async function currentToken(setId: string): Promise<{ accessToken: string; tokenId: string }> {
    const signed = await signer.sign({ url: `${vendUrl}/v1/credential-sets/${setId}/token`, method: 'GET' });
    const response = await fetch(signed.url, { headers: signed.headers });
    expect(response.status).toBe(200);
    return (await response.json()) as { accessToken: string; tokenId: string };
  }

  async function runBlock(setId: string, extraEnv: Record<string, string> = {}) {
    const { script } = documentedBlock();
    return run('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', script], {
      env: {
        PATH: process.env.PATH ?? '',
        BROKER: vendUrl,
        SET: setId,
        AWS_REGION: 'local',
        AWS_ACCESS_KEY_ID: CALLER.accessKeyId,
        AWS_SECRET_ACCESS_KEY: CALLER.secretAccessKey,
        ...extraEnv,
      },
      timeout: 150_000,
    });
  }

  /**
   * The status each command ended with: a 429 or 503 with Retry-After is sent again by the documented helper
   * (a re-login asked for right after the broker's own first login waits out the refresher's storm guard).
   */
  const statuses = (stderr: string) =>
    [...stderr.matchAll(/^HTTP (\d{3})( \(Retry-After: \d+\))?$/gm)]
      .filter((m) => !(m[2] && (m[1] === '429' || m[1] === '503')))
      .map((m) => Number(m[1]));

  beforeAll(async () => {
    // TIME_SCALE 10: the rejection, reported a moment after the broker's own first login, waits out the
    // refresher's storm guard (one login attempt per set a minute) in 6 s instead of 60 (the same statuses).
    broker = await startBrokerProcess({ BROKER_PORT: '0', LOG_LEVEL: 'info', TIME_SCALE: '10' });
    broker.child.stderr?.on('data', (chunk: Buffer) => {
      brokerLog += chunk.toString();
    });
    vendUrl =
      /token-broker \(local\) listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(broker.banner)?.[1] ?? '';
  }, 60_000);
  afterAll(() => stopBrokerProcess(broker?.child), 30_000);

  it('has curl 7.84 or later and jq', async () => {
    const curl = await tool('curl', ['--version'], 'the docs test runs the documented curl commands');
    const [major, minor] = (/^curl (\d+)\.(\d+)/.exec(curl) ?? []).slice(1).map(Number);
    if (!((major ?? 0) > 7 || (major === 7 && (minor ?? 0) >= 84))) {
      throw new Error(`${curl}: the documented commands need curl 7.84 or later (--aws-sigv4, %header{})`);
    }
    await tool('jq', ['--version'], 'the documented commands read the answers with jq');
  });

  it('documents the whole flow: token, permits, give-back, rate-limit report, rejection', () => {
    const { script, expected } = documentedBlock();
    expect(expected).toEqual([200, 200, 200, 204, 200]);
    for (const route of [
      '/token)',
      '/permits "',
      '/permits/returns',
      '/rate-limit-reports',
      '/token/rejections',
    ]) {
      expect(script).toContain(route);
    }
    expect(script).toContain('--aws-sigv4 "aws:amz:$AWS_REGION:lambda"');
    expect(script).toContain('--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"');
    expect(script).toContain('x-amz-security-token: $AWS_SESSION_TOKEN');
  });

  it('answers each documented command with its documented status, and the broker acts on the reports', async () => {
    const { expected } = documentedBlock();
    const before = await currentToken('uat-advisor');
    const { stdout, stderr } = await runBlock('uat-advisor');
    expect(statuses(stderr)).toEqual(expected);
    // What the commands print: the give-back's answer (the token answers go into variables).
    expect(JSON.parse(stdout)).toEqual({
      credentialSet: 'uat-advisor',
      tokenId: before.tokenId,
      returned: 2,
    });

    // The broker's side: the 429 report and the rejection, each audited for this token and caller, and the
    // rejection of the current token re-logged in: the set now serves another token.
    const audited = (decision: string, tokenField: string) =>
      brokerLog
        .split('\n')
        .filter(
          (line) =>
            line.includes('vend request') &&
            line.includes(`decision=${decision} `) &&
            line.includes(` ${tokenField}=${before.tokenId} `) &&
            line.includes('assumed-role/portfolio-service/'),
        );
    expect(audited('VENDOR_429_REPORTED', 'tokenId')).toHaveLength(1);
    expect(audited('RELOGIN_AFTER_REJECTION', 'rejectedTokenId')).toHaveLength(1);
    const after = await currentToken('uat-advisor');
    expect(after.tokenId).not.toBe(before.tokenId);

    for (const secret of [before.accessToken, after.accessToken, CALLER.secretAccessKey]) {
      expect(`${stdout}${stderr}`.includes(secret)).toBe(false);
    }
  }, 180_000);

  it('signs the session-token header in a form the Function URL verifies (temporary credentials)', async () => {
    const { expected } = documentedBlock();
    // The local adapter has no STS: this checks curl's signature over x-amz-security-token, not the token.
    const { stderr } = await runBlock('uat-execution', { AWS_SESSION_TOKEN: 'local-test-session' });
    expect(statuses(stderr)).toEqual(expected);
  }, 180_000);
});
