import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { CALLER, documentedBlock, run } from './support/docs-curl.js';
import { startBrokerProcess, stopBrokerProcess } from './support/local-broker-process.js';
// A rejection right after the broker's first login waits out its storm guard: 6 s of real time at TIME_SCALE 10.
import './support/real-time.js';

/**
 * The curl commands of docs/vend-api.md ("From any language: curl"), run as written with real curl and jq
 * against `npm start`: every status must be the one its `# HTTP` comment says. The block's content and the tools:
 * test/docs-curl.test.ts (`npm test`).
 */
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
