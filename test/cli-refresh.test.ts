import { afterEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../shared/clock.js';
import {
  type CliBroker,
  ONCALL,
  PORTFOLIO,
  REPORTING,
  runIn,
  startCliBroker,
} from './support/cli-harness.js';

/**
 * `token-broker refresh` and the 503's cause, in process against the local broker (SigV4, dynalite, the sandboxes
 * over HTTP) with the committed configuration: `oncall` may force re-logins, `status-board` reads status only.
 */
const STATUS_BOARD = {
  AWS_ACCESS_KEY_ID: 'AKIALOCALSTATUSBOARD',
  AWS_SECRET_ACCESS_KEY: 'local-only-status-board-secret',
};

let b: CliBroker | undefined;
afterEach(async () => {
  await b?.close();
  b = undefined;
});

async function started(options: Parameters<typeof startCliBroker>[0] = {}) {
  b = await startCliBroker(options);
  await b.broker.refreshNow();
  const clock = b.clock as ManualClock;
  const env = b.env;
  const cli = (argv: string[], keys: Record<string, string>) =>
    runIn(argv, { env: { ...env, ...keys }, clock });
  const logins = () => b?.broker.sandboxes.uat?.stats().logins['uat-advisor']?.successes ?? 0;
  return { b, clock, cli, logins };
}

describe('token-broker refresh', () => {
  it('prints the new token id and expiry; ten at once log in once, and all name the same token', async () => {
    const { clock, cli, logins } = await started();
    const before = JSON.parse((await cli(['token', 'uat-advisor', '--json'], PORTFOLIO)).stdout).tokenId;
    await clock.advance(61_000);
    const loginsBefore = logins();
    const runs = await Promise.all(Array.from({ length: 10 }, () => cli(['refresh', 'uat-advisor'], ONCALL)));
    expect(runs.map((run) => run.exit)).toEqual(Array(10).fill(0));
    expect(logins()).toBe(loginsBefore + 1);
    const ids = new Set(runs.map((run) => /token ([0-9a-f]{16}) /.exec(run.stdout)?.[1]));
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    expect(id).not.toBe(before);
    for (const run of runs) {
      expect(run.stdout).toMatch(
        new RegExp(
          `^uat-advisor \\(uat\\): token ${id} logged in( \\w+ ago by another request)?, replaces ${before}; expires \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ \\(in 3h 59m\\)\\n$`,
        ),
      );
      expect(`${run.stdout}${run.stderr}`).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
    }
    // The consumers get the new token at once.
    expect(JSON.parse((await cli(['token', 'uat-advisor', '--json'], PORTFOLIO)).stdout).tokenId).toBe(id);
  });

  it('is refused to a consumer key and a status-only key: exit 1, the code and why; nothing logs in', async () => {
    const { clock, cli, logins } = await started();
    await clock.advance(61_000);
    const loginsBefore = logins();
    for (const keys of [PORTFOLIO, REPORTING, STATUS_BOARD]) {
      const run = await cli(['refresh', 'uat-advisor'], keys);
      expect(run).toMatchObject({ exit: 1, stdout: '' });
      expect(run.stderr.trimEnd().split('\n').at(-1)).toMatch(
        /^token-broker refresh: error INSUFFICIENT_PERMISSIONS: this caller may not force a re-login of credential set "uat-advisor": only an operator entry with "refresh": true may \(HTTP 403\) \(broker requestId [\w-]+\)$/,
      );
    }
    expect(logins()).toBe(loginsBefore);
    // Seconds later (another on-call engineer): the token just made, no second login.
    const first = await cli(['refresh', 'uat-advisor'], ONCALL);
    expect(first.exit).toBe(0);
    await clock.advance(3_000);
    const soon = await cli(['refresh', 'uat-advisor'], ONCALL);
    expect(soon.exit).toBe(0);
    const id = /token ([0-9a-f]{16}) /.exec(first.stdout)?.[1];
    expect(soon.stdout).toMatch(
      new RegExp(`^uat-advisor \\(uat\\): token ${id} logged in 3s ago by another request;`),
    );
    expect(logins()).toBe(loginsBefore + 1);

    const help = await cli(['refresh', '--help'], ONCALL);
    expect(help.stdout).toContain('Usage: token-broker refresh <set>');
  });
});

describe('a wrong password', () => {
  it('two different callers both see the cause in their 503, and the operator in its refresh', async () => {
    const { cli } = await started({
      credentials: { 'token-broker/uat-advisor': { username: 'uat-advisor', password: 'not-the-password' } },
    });
    const line = (run: { stderr: string }) => run.stderr.trimEnd().split('\n').at(-1);
    const cause =
      'credential set "uat-advisor" has no usable token: the vendor rejected the set\'s username or password (INVALID_CREDENTIALS)';
    for (const keys of [PORTFOLIO, REPORTING, PORTFOLIO]) {
      const run = await cli(['token', 'uat-advisor'], keys);
      expect(run).toMatchObject({ exit: 1, stdout: '' });
      expect(line(run)).toMatch(
        new RegExp(`^token-broker token: error TOKEN_UNAVAILABLE: ${quoted(cause)} \\(HTTP 503\\)`),
      );
    }
    const refresh = await cli(['refresh', 'uat-advisor'], ONCALL);
    expect(refresh.exit).toBe(1);
    expect(line(refresh)).toContain('error TOKEN_UNAVAILABLE:');
    expect(line(refresh)).toContain('(INVALID_CREDENTIALS)');
  });
});

const quoted = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
