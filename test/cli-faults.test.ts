import { afterEach, describe, expect, it } from 'vitest';
import { BrokerClient } from '../client/broker-client.js';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { VendorRateLimitError } from '../shared/vendor-client/errors.js';
import {
  type CliBroker,
  PORTFOLIO,
  runIn,
  SANDBOX_PASSWORDS,
  startCliBroker,
} from './support/cli-harness.js';
import { whileAdvancing } from './support/refresher-harness.js';

/**
 * For each fault the vendor sandbox can inject, `token-broker status` names the cause: the state, the error
 * code, the vendor's requestId, the cause in words and the runbook section. The local broker runs on a
 * ManualClock; the refresher's runs are the schedule's, driven by the test.
 */
const START = Date.UTC(2026, 0, 5, 9, 0, 0);
const HOUR = 3600 * 1000;
let b: CliBroker | undefined;
let extra: Sandbox | undefined;
afterEach(async () => {
  await b?.close();
  await extra?.close();
  b = undefined;
  extra = undefined;
});

interface Entry {
  id: string;
  state: string;
  expiresAt: number | null;
  lastError: { code: string; at: string; requestId?: string } | null;
  consecutiveFailures: number;
  nextAttemptAt: string | null;
  rateLimitedUntil: string | null;
  quota: { used: number; remaining: number; class?: string }[] | null;
  causes: { code: string | null; summary: string; runbook: string | null }[];
}

/**
 * The table, the narrow table and the JSON of `status`, and its exit code, the same for all three: 0 when every set
 * is HEALTHY or REFRESHING, 4 with a DEGRADED one, 5 with one without a token.
 */
async function status(
  broker: CliBroker,
): Promise<{ table: string; narrow: string; sets: Record<string, Entry>; exit: number }> {
  const clock = broker.clock as ManualClock;
  const table = await runIn(['status', '--wide'], { env: broker.env, clock });
  const narrow = await runIn(['status'], { env: broker.env, clock });
  const json = await runIn(['status', '--json'], { env: broker.env, clock });
  expect([narrow.exit, json.exit]).toEqual([table.exit, table.exit]);
  for (const text of [table.stdout, table.stderr, narrow.stdout, json.stdout, json.stderr]) {
    for (const secret of [...SANDBOX_PASSWORDS, 'not-the-password']) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
  }
  const entries = JSON.parse(json.stdout).credentialSets as Entry[];
  return {
    table: table.stdout,
    narrow: narrow.stdout,
    sets: Object.fromEntries(entries.map((e) => [e.id, e])),
    exit: table.exit,
  };
}

const row = (table: string, setId: string): string =>
  table.split('\n').find((line) => line.startsWith(`${setId} `)) ?? '';

describe('status names the cause of each fault', () => {
  it('vendor outage: DEGRADED while the old token lasts, then NO_USABLE_TOKEN; SERVICE_UNAVAILABLE, "vendor unavailable"', async () => {
    const clock = new ManualClock(START);
    b = await startCliBroker({ clock });
    await b.broker.refreshNow();
    b.broker.sandboxes.uat?.update({ outage: true });

    // 3 h 20 min later every token is inside its soft threshold (a fifth of its 4 h life, or a little less):
    // the run re-logs in; UAT's vendor is down.
    await clock.advance(3 * HOUR + 20 * 60_000);
    await whileAdvancing(clock, b.broker.refreshNow());
    let { table, narrow, sets, exit } = await status(b);
    // A pipeline gating on status sees 4: a set is DEGRADED, none without a token.
    expect(exit).toBe(4);
    const note = await runIn(['status'], { env: b.env, clock });
    expect(note.stderr).toMatch(/ set\(s\) at \S+; exit 4: uat-advisor DEGRADED, uat-execution DEGRADED\n$/);
    // --watch goes on whatever the health, and Ctrl-C ends it with 0.
    const interrupt = new AbortController();
    const watched = await runIn(['status', '--watch', '5'], {
      env: b.env,
      clock: new ManualClock(clock.now(), { autoAdvance: true }),
      interruption: interrupt.signal,
      onStdout: (text) => {
        if (text.includes('Ctrl-C stops')) interrupt.abort();
      },
    });
    expect(watched.exit).toBe(0);
    expect(watched.stdout).toMatch(/^uat-advisor\s+DEGRADED\s+/m);
    expect(sets['uat-advisor']).toMatchObject({
      state: 'DEGRADED',
      lastError: { code: 'SERVICE_UNAVAILABLE' },
      causes: [
        {
          code: 'SERVICE_UNAVAILABLE',
          summary: expect.stringMatching(
            /^vendor unavailable: logins fail with SERVICE_UNAVAILABLE; the current token is still served \(expires in 39m \d\ds\); next login attempt in (1m \d\ds|\d\ds)$/,
          ),
          runbook: 'vendor-unavailable',
        },
      ],
    });
    expect(sets['prod-advisor']).toMatchObject({
      state: 'HEALTHY',
      lastError: null,
      causes: [{ summary: 'ok' }],
    });
    expect(row(table, 'uat-advisor')).toMatch(
      /^uat-advisor\s+uat\s+DEGRADED\s+39m \d\ds\s+3h 20m ago\s+SERVICE_UNAVAILABLE \d+s ago\s+\S+\s+in (1m \d\ds|\d\ds)\s+0\/50 per 1m, 0\/1000 per 1h(, [a-z-]+ \d+\/\d+ per \d+s)*\s+vendor unavailable: .*\[runbook #vendor-unavailable\]$/,
    );
    // The narrow default: the token's time left and age, the quota, the code and the runbook section.
    expect(row(narrow, 'uat-advisor')).toMatch(
      /^uat-advisor\s+DEGRADED\s+39m \d\ds\s+3h 20m\s+0\/50 1m, 0\/1000 1h\s+#vendor-unavailable$/,
    );

    // The outage outlasts the token: past its hard floor (5 min before exp) consumers get 503.
    await clock.advance(37 * 60_000);
    await whileAdvancing(clock, b.broker.refreshNow());
    ({ table, narrow, sets, exit } = await status(b));
    expect(exit).toBe(5);
    expect(sets['uat-advisor']).toMatchObject({
      state: 'NO_USABLE_TOKEN',
      lastError: { code: 'SERVICE_UNAVAILABLE' },
      consecutiveFailures: 2,
      causes: [
        {
          code: 'SERVICE_UNAVAILABLE',
          summary: expect.stringMatching(
            /^vendor unavailable: logins fail with SERVICE_UNAVAILABLE; consumers get 503 TOKEN_UNAVAILABLE; 2 failed attempts in a row; next login attempt in (2m 00s|1m \d\ds)$/,
          ),
          runbook: 'vendor-unavailable',
        },
      ],
    });
    expect(row(table, 'uat-advisor')).toMatch(/^uat-advisor\s+uat\s+NO_USABLE_TOKEN\s+/);
    expect(row(narrow, 'uat-advisor')).toMatch(
      /^uat-advisor\s+NO_USABLE_TOKEN\s+\d+m \d\ds\s+.*#vendor-unavailable$/,
    );
    const token = await whileAdvancing(clock, runIn(['token', 'uat-advisor'], { env: b.env, clock }));
    expect(token).toMatchObject({ exit: 1, stdout: '' });
    expect(token.stderr).toMatch(/error TOKEN_UNAVAILABLE: .*\(HTTP 503\)/);

    // The vendor is back: the next run logs in and the set is healthy again.
    b.broker.sandboxes.uat?.update({ outage: false });
    await clock.advance(5 * 60_000);
    await whileAdvancing(clock, b.broker.refreshNow());
    ({ sets, exit } = await status(b));
    expect(sets['uat-advisor']).toMatchObject({
      state: 'HEALTHY',
      lastError: null,
      causes: [{ summary: 'ok' }],
    });
    expect(exit).toBe(0);
  });

  it('wrong password: CREDENTIALS_REJECTED with INVALID_CREDENTIALS and the vendor’s requestId; a new secret fixes it', async () => {
    const clock = new ManualClock(START);
    b = await startCliBroker({
      clock,
      credentials: {
        'token-broker/uat-execution': { username: 'uat-execution', password: 'not-the-password' },
      },
    });
    await b.broker.refreshNow();
    const { table, narrow, sets, exit } = await status(b);
    expect(exit).toBe(5);
    const entry = sets['uat-execution'];
    expect(entry).toMatchObject({
      state: 'CREDENTIALS_REJECTED',
      expiresAt: null,
      lastError: { code: 'INVALID_CREDENTIALS', at: new Date(clock.now()).toISOString() },
      consecutiveFailures: 1,
      nextAttemptAt: new Date(clock.now() + 900_000).toISOString(),
      quota: null,
      causes: [
        {
          code: 'INVALID_CREDENTIALS',
          summary:
            'the vendor rejected the username or password (INVALID_CREDENTIALS): put the right ones with ' +
            '"token-broker put-credentials uat-execution"; consumers get 503 TOKEN_UNAVAILABLE; next login attempt in 15m 00s',
          runbook: 'credentials-rejected',
        },
      ],
    });
    const requestId = entry?.lastError?.requestId ?? '';
    expect(requestId).toMatch(/^[\w-]{8,}$/);
    expect(row(table, 'uat-execution')).toMatch(
      new RegExp(
        `^uat-execution\\s+uat\\s+CREDENTIALS_REJECTED\\s+-\\s+never\\s+INVALID_CREDENTIALS 0s ago\\s+${requestId}\\s+in 15m 00s\\s+-\\s+the vendor rejected`,
      ),
    );
    expect(row(narrow, 'uat-execution')).toMatch(
      /^uat-execution\s+CREDENTIALS_REJECTED\s+-\s+never\s+-\s+#credentials-rejected$/,
    );
    expect(sets['uat-advisor']?.state).toBe('HEALTHY');

    // The same secret version rejected again after its cooldown: the next wait is an hour, and status says so.
    await clock.advance(15 * 60_000);
    await b.broker.refreshNow();
    const again = await status(b);
    expect(again.sets['uat-execution']).toMatchObject({
      consecutiveFailures: 2,
      nextAttemptAt: new Date(clock.now() + 3_600_000).toISOString(),
    });
    expect(again.sets['uat-execution']?.causes[0]?.summary).toMatch(
      /; 2 failed attempts in a row; this secret version was rejected 2 times, so the wait between attempts grows \(a new version is tried at once\); next login attempt in 1h 00m$/,
    );
    expect(row(again.table, 'uat-execution')).toMatch(/\s+in 1h 00m\s+/);

    // A new secret version is tried at the next run, without waiting out the cooldown.
    b.putCredentials('token-broker/uat-execution', {
      username: 'uat-execution',
      password: 'uat-execution-sandbox-pw',
    });
    await clock.advance(5 * 60_000);
    await b.broker.refreshNow();
    expect((await status(b)).sets['uat-execution']).toMatchObject({ state: 'HEALTHY', lastError: null });
  });

  it('vendor 429s reported by a consumer: rate limited until the Retry-After, RATE_LIMIT_EXCEEDED', async () => {
    const clock = new ManualClock(START + 30_000);
    b = await startCliBroker({ clock });
    await b.broker.refreshNow();
    const sandbox = b.broker.sandboxes.uat as Sandbox;
    const client = new BrokerClient({
      brokerUrl: b.broker.vendUrl,
      region: 'local',
      credentials: {
        accessKeyId: PORTFOLIO.AWS_ACCESS_KEY_ID,
        secretAccessKey: PORTFOLIO.AWS_SECRET_ACCESS_KEY,
      },
      clock,
      vendorBaseUrls: { 'uat-advisor': sandbox.url },
    });
    // Every call gets 429 (Retry-After: to the end of the vendor's minute); the client reports each one.
    sandbox.inject({ target: 'resources', errorCode: 'RATE_LIMIT_EXCEEDED', count: 100 });
    const failure = await whileAdvancing(
      clock,
      client
        .vendorRequest('uat-advisor', { method: 'GET', path: (t) => `/users/1/${t.tenant}/serviceKey/c-1` })
        .catch((error: unknown) => error),
      1000,
    );
    await client.close();
    expect(failure).toBeInstanceOf(VendorRateLimitError);
    const rateLimited = sandbox.stats().errorsByCode.RATE_LIMIT_EXCEEDED ?? 0;
    expect(rateLimited).toBeGreaterThanOrEqual(1);

    const { table, sets, exit } = await status(b);
    // Rate limited is not unwell: the token is good, permits come back after the Retry-After.
    expect(exit).toBe(0);
    const entry = sets['uat-advisor'];
    const until = Date.parse(entry?.rateLimitedUntil ?? '');
    expect(until).toBeGreaterThan(clock.now());
    // The vendor's Retry-After runs to the end of its current minute.
    expect(until).toBeLessThanOrEqual(clock.now() + 60_000);
    expect(entry).toMatchObject({
      state: 'HEALTHY',
      lastError: null,
      causes: [
        {
          code: 'RATE_LIMIT_EXCEEDED',
          summary: `rate limited by the vendor until ${new Date(until).toISOString().replace('.000Z', 'Z')}: consumers reported 429 RATE_LIMIT_EXCEEDED, no permits until then`,
          runbook: 'vendor-429-reported-by-consumers',
        },
      ],
    });
    // Every attempt took a permit; none is left during the cooldown (in the general windows: the set's request
    // classes, on the probe, took none).
    expect(entry?.quota?.filter((w) => w.class === undefined).map((w) => [w.used, w.remaining])).toEqual([
      [rateLimited, 0],
      [rateLimited, 0],
    ]);
    expect(row(table, 'uat-advisor')).toMatch(
      new RegExp(
        `${rateLimited}/50 per 1m, ${rateLimited}/1000 per 1h(, [a-z-]+ \\d+/\\d+ per \\d+s)*\\s+rate limited by the vendor until .*\\[runbook #vendor-429-reported-by-consumers\\]$`,
      ),
    );
    expect(sets['uat-execution']?.causes).toEqual([{ code: null, summary: 'ok', runbook: null }]);

    // After the Retry-After the cooldown is over.
    await clock.advance(until - clock.now() + 1);
    expect((await status(b)).sets['uat-advisor']?.rateLimitedUntil).toBeNull();
  });

  it('token from the other environment: ENV_MISMATCH, "the other environment"', async () => {
    const clock = new ManualClock(START);
    // A UAT set pointed at the production vendor, with production credentials: its token says env=prod.
    extra = await startSandbox({ environment: 'prod', clock, quiet: true });
    const prodUrl = extra.url;
    b = await startCliBroker({
      clock,
      credentials: {
        'token-broker/uat-advisor': { username: 'prod-advisor', password: 'prod-advisor-sandbox-pw' },
      },
      configure: (config) => {
        const set = config.credentialSets.find((s) => s.id === 'uat-advisor');
        if (set) set.vendorBaseUrl = prodUrl;
      },
    });
    await b.broker.refreshNow();
    expect(extra.stats().logins['prod-advisor']?.successes).toBe(1);
    const { table, sets, exit } = await status(b);
    expect(exit).toBe(5);
    expect(sets['uat-advisor']).toMatchObject({
      state: 'ENV_MISMATCH',
      expiresAt: null,
      lastError: { code: 'ENV_MISMATCH' },
      causes: [
        {
          code: 'ENV_MISMATCH',
          summary: expect.stringMatching(
            /^the vendor's token is for another environment than the set's "uat": its vendorBaseUrl or its secret belongs to the other environment; consumers get 503 TOKEN_UNAVAILABLE/,
          ),
          runbook: 'env-mismatch',
        },
      ],
    });
    expect(row(table, 'uat-advisor')).toMatch(
      /^uat-advisor\s+uat\s+ENV_MISMATCH\s+-\s+never\s+ENV_MISMATCH 0s ago\s+/,
    );
    expect(sets['uat-execution']?.state).toBe('HEALTHY');
  });
});
