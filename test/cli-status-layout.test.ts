import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { type CliBroker, ONCALL, runIn, startCliBroker } from './support/cli-harness.js';

/**
 * How `token-broker status` fits where it is read: narrow by default (a pipe: 100 characters; a terminal: its
 * width), `--wide` for every column, and `--watch` redrawing on the CLI's clock until interrupted. In process
 * against the local broker, as the on-call operator, with one set whose password the vendor rejects (the
 * longest state and cause there are).
 */
let b: CliBroker;
let clock: ManualClock;

beforeAll(async () => {
  b = await startCliBroker({
    credentials: {
      'token-broker/uat-execution': { username: 'uat-execution', password: 'not-the-password' },
    },
  });
  clock = b.clock as ManualClock;
  await b.broker.refreshNow();
  await clock.advance(90_000);
});
afterAll(async () => {
  await b?.close();
});

const oncall = () => ({ ...b.env, ...ONCALL });
const status = (argv: string[], terminalColumns?: number) =>
  runIn(['status', ...argv], {
    env: oncall(),
    clock,
    ...(terminalColumns === undefined ? {} : { terminalColumns }),
  });
const row = (stdout: string, id: string) =>
  stdout.split('\n').find((line) => line.startsWith(`${id} `)) ?? '';
const widest = (stdout: string) =>
  Math.max(
    ...stdout
      .trimEnd()
      .split('\n')
      .map((line) => line.length),
  );

describe('status: narrow by default, --wide for every column', () => {
  it('narrow: state, expiry, age, quota and the cause as runbook sections, within 100 characters on a pipe', async () => {
    const run = await status([]);
    // uat-execution has no token (its password is rejected): status exits 5 and says which set.
    expect(run.exit, run.stderr).toBe(5);
    expect(run.stderr).toMatch(/; exit 5: uat-execution CREDENTIALS_REJECTED\n$/);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^SET\s+STATE\s+EXPIRES IN\s+AGE\s+QUOTA USED\s+CAUSE$/);
    expect(row(run.stdout, 'uat-advisor')).toMatch(
      /^uat-advisor\s+HEALTHY\s+3h 5\dm\s+1m 30s\s+0\/50 1m, 0\/1000 1h\s+ok$/,
    );
    // The rejected set's line would pass 100 with the code too: it keeps the runbook section.
    expect(row(run.stdout, 'uat-execution')).toMatch(
      /^uat-execution\s+CREDENTIALS_REJECTED\s+-\s+never\s+-\s+#credentials-rejected$/,
    );
    expect(widest(run.stdout)).toBeLessThanOrEqual(100);
  });

  it('on a terminal, as wide as the terminal: the code and the section on 200 columns, cut on 60', async () => {
    const wide = await status([], 200);
    expect(row(wide.stdout, 'uat-execution')).toMatch(/\sINVALID_CREDENTIALS #credentials-rejected$/);

    const narrow = await status([], 60);
    const lines = narrow.stdout.trimEnd().split('\n');
    expect(widest(narrow.stdout)).toBe(60);
    expect(row(narrow.stdout, 'uat-execution')).toMatch(/^uat-execution\s+CREDENTIALS_REJECTED\s.*…$/);
    for (const line of lines) expect(line.length === 60 ? line.endsWith('…') : true, line).toBe(true);
  });

  it('--wide: every column it has (environment, last error and the vendor requestId, the cause in words)', async () => {
    const run = await status(['--wide']);
    expect(run.exit, run.stderr).toBe(5);
    expect(run.stdout.split('\n')[0]).toMatch(
      /^SET\s+ENV\s+STATE\s+EXPIRES IN\s+LAST REFRESH\s+LAST ERROR\s+VENDOR REQUEST ID\s+NEXT ATTEMPT\s+QUOTA USED\s+CAUSE$/,
    );
    expect(row(run.stdout, 'uat-execution')).toMatch(
      /^uat-execution\s+uat\s+CREDENTIALS_REJECTED\s+-\s+never\s+INVALID_CREDENTIALS 1m 30s ago\s+[\w-]+\s+in 13m 30s\s+-\s+the vendor rejected the username or password .*\[runbook #credentials-rejected\]$/,
    );
    expect(row(run.stdout, 'prod-execution')).toContain(
      '(portfolio-service 0/23, 23 left; shared 0/27, 27 left)',
    );
    expect(widest(run.stdout)).toBeGreaterThan(200);
    // The same rows, whatever the terminal: --wide is not cut.
    expect((await status(['--wide'], 80)).stdout).toBe(run.stdout);
  });
});

describe('status --watch', () => {
  /** Runs `status` until `rounds` have been printed, then interrupts it as Ctrl-C does. */
  async function watch(
    argv: string[],
    rounds: number,
    options: { terminalColumns?: number; url?: string } = {},
  ) {
    // The CLI's own clock, moved by each wait it makes: rounds follow each other at once, each later by the interval.
    const cliClock = new ManualClock(clock.now(), { autoAdvance: true });
    const interrupt = new AbortController();
    let printed = 0;
    const run = await runIn(['status', ...argv], {
      env: { ...oncall(), ...(options.url ? { TOKEN_BROKER_URL: options.url } : {}) },
      clock: cliClock,
      interruption: interrupt.signal,
      ...(options.terminalColumns === undefined ? {} : { terminalColumns: options.terminalColumns }),
      onStdout: (text) => {
        if (text.includes('Ctrl-C stops') && ++printed === rounds) interrupt.abort();
      },
    });
    return { run, started: clock.now() };
  }

  it('redraws the terminal every SECONDS of the clock until interrupted, then exits 0', async () => {
    const { run, started } = await watch(['--watch', '60'], 3, { terminalColumns: 120 });
    expect(run.exit, run.stderr).toBe(0);
    const rounds = run.stdout.split('\u001b[H\u001b[2J').slice(1);
    expect(rounds).toHaveLength(3);
    rounds.forEach((round, i) => {
      const at = new Date(started + i * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      expect(round.trimEnd().split('\n').at(-1)).toBe(`${at}, every 60s; Ctrl-C stops`);
      // The token's age as the CLI's clock moves: 1m 30s, then a minute more each round.
      expect(row(round, 'uat-advisor')).toMatch(
        new RegExp(`^uat-advisor\\s+HEALTHY\\s+\\S+ \\S+\\s+${i + 1}m 30s\\s`),
      );
    });
  });

  it('--watch without seconds takes 10, before a set id; a round that fails prints its error and the watch goes on', async () => {
    const { run } = await watch(['--watch', 'uat-advisor'], 2, { url: 'http://127.0.0.1:9' });
    expect(run.exit).toBe(0);
    // Not a terminal: rounds one after the other, no escape codes.
    expect(run.stdout).not.toContain('\u001b');
    const round =
      'token-broker status: error BROKER_UNREACHABLE: [^\\n]+\\n\\n\\S+Z, every 10s; Ctrl-C stops\\n';
    expect(run.stdout).toMatch(new RegExp(`^${round}\\n${round}$`));
  });

  it('refuses an interval under 2 seconds and --watch with --json (exit 2, nothing asked)', async () => {
    for (const argv of [['--watch', '1'], ['--watch=0'], ['--watch', '--json']]) {
      const run = await status(argv);
      expect(run.exit, argv.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/error USAGE_ERROR: --watch/);
    }
  });
});
