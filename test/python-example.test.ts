import { type ChildProcess, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { startBrokerProcess, stopBrokerProcess } from './support/local-broker-process.js';

/**
 * examples/python/token_broker_example.py against `npm start` over HTTP on 127.0.0.1: the Python consumer signs
 * with botocore, takes and gives back permits, reports a vendor 429 and waits out the cooldown it causes.
 */
const run = promisify(execFile);
const EXAMPLE = 'examples/python/token_broker_example.py';
const CALLER = {
  accessKeyId: 'AKIALOCALPORTFOLIO01',
  secretAccessKey: 'local-only-portfolio-service-secret',
};

/** python3 on PATH, else Debian's (python3-botocore installs there, not into a pyenv or venv Python). */
async function pythonWithBotocore(): Promise<string | undefined> {
  for (const candidate of ['python3', '/usr/bin/python3']) {
    const ok = await run(candidate, ['-c', 'import botocore']).then(
      () => true,
      () => false,
    );
    if (ok) return candidate;
  }
  return undefined;
}

interface QuotaFigures {
  limit: number;
  windowSeconds: number;
  remaining: number;
  used: number;
}

describe('the Python example against npm start', () => {
  let broker: { child: ChildProcess; banner: string };
  let python: string | undefined;
  let vendUrl: string;
  let uatSandboxUrl: string;
  let brokerLog = '';
  const signer = new FunctionUrlSigner({ region: 'local', credentials: CALLER });

  async function signedGet(path: string): Promise<Record<string, unknown>> {
    const signed = await signer.sign({ url: `${vendUrl}${path}`, method: 'GET' });
    const response = await fetch(signed.url, { headers: signed.headers });
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  async function quotaOf(setId: string): Promise<QuotaFigures[]> {
    const list = (await signedGet('/v1/credential-sets')) as {
      credentialSets: { id: string; quota: QuotaFigures[] | null }[];
    };
    return list.credentialSets.find((set) => set.id === setId)?.quota ?? [];
  }

  async function runExample(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    if (!python) throw new Error('no python3 with botocore');
    return run(python, ['-B', EXAMPLE, ...args], {
      env: {
        PATH: process.env.PATH ?? '',
        // What a pyenv `python3` needs to find its interpreter (the one pythonWithBotocore found).
        ...Object.fromEntries(
          Object.entries(process.env).filter(([name]) => name === 'HOME' || name.startsWith('PYENV_')),
        ),
        TOKEN_BROKER_URL: vendUrl,
        AWS_REGION: 'local',
        AWS_ACCESS_KEY_ID: CALLER.accessKeyId,
        AWS_SECRET_ACCESS_KEY: CALLER.secretAccessKey,
        // No profile or instance role of the machine running the tests may sign instead.
        AWS_CONFIG_FILE: '/dev/null',
        AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
        AWS_EC2_METADATA_DISABLED: 'true',
      },
      timeout: 150_000,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({
        code: error.code,
        stdout: error.stdout,
        stderr: error.stderr,
      }),
    );
  }

  /** Neither the access token (the current one of any set used) nor the caller's secret key may be printed. */
  async function expectNoSecrets(output: string, setIds: string[]): Promise<void> {
    for (const setId of setIds) {
      const token = await signedGet(`/v1/credential-sets/${setId}/token`);
      expect(typeof token.accessToken).toBe('string');
      expect(output.includes(String(token.accessToken))).toBe(false);
    }
    expect(output.includes(CALLER.secretAccessKey)).toBe(false);
  }

  beforeAll(async () => {
    python = await pythonWithBotocore();
    // The vend audit lines (level info) say what the broker did with each report.
    broker = await startBrokerProcess({ BROKER_PORT: '0', LOG_LEVEL: 'info' });
    broker.child.stderr?.on('data', (chunk: Buffer) => {
      brokerLog += chunk.toString();
    });
    vendUrl =
      /token-broker \(local\) listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(broker.banner)?.[1] ?? '';
    uatSandboxUrl = /vendor sandbox uat: (http:\/\/127\.0\.0\.1:\d+)/.exec(broker.banner)?.[1] ?? '';
  }, 60_000);
  afterAll(() => stopBrokerProcess(broker?.child), 30_000);

  /** What the broker said last, and whether it still runs: the message of a failed example run. */
  const brokerState = () =>
    `broker ${broker?.child.exitCode === null && broker.child.signalCode === null ? 'running' : `exited (${broker?.child.exitCode ?? broker?.child.signalCode})`}; its last log lines:\n${brokerLog.split('\n').slice(-15).join('\n')}`;

  it('finds a python3 that can import botocore (CI installs python3-botocore when there is none)', () => {
    if (!python) {
      throw new Error(
        'no Python with botocore: neither `python3` on PATH nor /usr/bin/python3 can `import botocore`. ' +
          'Install it: sudo apt-get install -y python3-botocore (.ci/run does), or pip install botocore.',
      );
    }
    expect(python).toBeTruthy();
  });

  it('takes a batch of permits, makes its vendor calls, gives the unused ones back by receipt', async () => {
    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-execution',
      '--calls',
      '2',
      '--permits',
      '5',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe(`broker ${vendUrl}, set uat-execution, region local`);
    expect(lines[1]).toMatch(
      /^token: tokenId=[0-9a-f]{16} expiresInSeconds=\d+ quota: 50\/50 per 60 s, 1000\/1000 per 3600 s$/,
    );
    expect(lines.slice(2)).toEqual([
      'permits: granted 5 of 5, remaining 45/50 per 60 s, 995/1000 per 3600 s',
      'vendor call 1: 404 RESOURCE_NOT_FOUND',
      'vendor call 2: 404 RESOURCE_NOT_FOUND',
      'give-back: returned 3 of 3 unused permit(s)',
      'done: 2 vendor call(s) made under permits',
    ]);
    // The ledger's own figures: of the 5 granted, the 3 given back are counted no more (the hour's window
    // spans the whole test, so no grant ages out of it meanwhile).
    const hour = (await quotaOf('uat-execution')).find((w) => w.windowSeconds === 3600);
    expect(hour).toMatchObject({ limit: 1000, used: 2, remaining: 998 });
    await expectNoSecrets(stdout, ['uat-execution']);
  }, 60_000);

  it('asks for fewer at once when the broker says one grant can never give it as many (400 with maxCount)', async () => {
    const { code, stdout, stderr } = await runExample([
      '--set',
      'prod-advisor',
      '--calls',
      '2',
      '--permits',
      '60',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    expect(stdout.trim().split('\n').slice(2)).toEqual([
      'permits: 400 INVALID_VALUE, more than one grant can give: asking for 50',
      'permits: granted 50 of 50, remaining 0/50 per 60 s, 950/1000 per 3600 s',
      'vendor call 1: 404 RESOURCE_NOT_FOUND',
      'vendor call 2: 404 RESOURCE_NOT_FOUND',
      'give-back: returned 48 of 48 unused permit(s)',
      'done: 2 vendor call(s) made under permits',
    ]);
  }, 60_000);

  it('reports a vendor 429 to the broker, gives its permits back, and waits out the cooldown before calling again', async () => {
    // The uat vendor answers the next resource request 429 with Retry-After (to the end of its minute window).
    const fault = await fetch(`${uatSandboxUrl}/_sandbox/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' }),
    });
    expect(fault.status).toBe(201);

    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-advisor',
      '--calls',
      '1',
      '--permits',
      '3',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const retryAfter = Number(
      /^vendor call 1: 429 RATE_LIMIT_EXCEEDED, Retry-After (\d+) s$/m.exec(stdout)?.[1],
    );
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(stdout).toContain(`rate-limit report: accepted (204), retryAfterSeconds=${retryAfter}\n`);
    // The 429'd request used its permit; the other two go back.
    expect(stdout).toContain('give-back: returned 2 of 2 unused permit(s)\n');
    // Whether the next ask meets the cooldown (it does unless the report and the give-back outlast it), the
    // example asks again until it is granted, and the call is made under the new grant.
    const cooldownWaits = stdout.match(
      /^permits: 429 RATE_LIMIT_EXCEEDED \(COOLDOWN\), Retry-After \d+ s: waiting [\d.]+ s$/gm,
    );
    expect(cooldownWaits?.length ?? 0).toBeLessThanOrEqual(2);
    expect(stdout.match(/^permits: granted 3 of 3, remaining .*$/gm)).toHaveLength(2);
    expect(stdout).toContain('vendor call 1: 404 RESOURCE_NOT_FOUND\n');
    expect(stdout).toContain(
      'give-back: returned 2 of 2 unused permit(s)\ndone: 1 vendor call(s) made under permits\n',
    );
    expect(stdout.split('\n').filter((line) => line.startsWith('give-back:'))).toHaveLength(2);

    // The broker's side: the report was accepted as a vendor 429 from this caller, as the vendor said it.
    const audit = brokerLog
      .split('\n')
      .filter((line) => line.includes('vend request') && line.includes('decision=VENDOR_429_REPORTED'));
    expect(audit).toHaveLength(1);
    expect(audit[0]).toContain('credentialSet=uat-advisor');
    expect(audit[0]).toContain('status=204');
    const tokenId = /^token: tokenId=([0-9a-f]{16}) /m.exec(stdout)?.[1];
    expect(audit[0]).toContain(`tokenId=${tokenId} `);
    expect(audit[0]).toContain('assumed-role/portfolio-service/');
    // Two grants of 3, each with 2 given back: 2 permits used (the 429'd request and the call after it).
    const hour = (await quotaOf('uat-advisor')).find((w) => w.windowSeconds === 3600);
    expect(hour).toMatchObject({ limit: 1000, used: 2, remaining: 998 });
    // The vendor answered one 429 in all (both tests' calls go to the uat sandbox).
    const stats = (await (await fetch(`${uatSandboxUrl}/_sandbox/stats`)).json()) as {
      responsesByStatus: Record<string, number>;
      errorsByCode: Record<string, number>;
    };
    expect(stats.responsesByStatus['429']).toBe(1);
    expect(stats.errorsByCode.RATE_LIMIT_EXCEEDED).toBe(1);
    await expectNoSecrets(`${stdout}${stderr}`, ['uat-advisor']);
  }, 180_000);

  it('classifies a report path by the class patterns of the set and takes permits of that class', async () => {
    // local/broker.config.json gives uat-advisor the classes reports (/reports/**) and rebalancing, limits learned.
    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-advisor',
      '--calls',
      '1',
      '--permits',
      '1',
      '--vendor-path',
      '/reports/daily/{tenant}',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    // The token answer lists the classes; the path /reports/daily/<tenant> is of "reports" by its pattern.
    expect(lines[2]).toBe('request class: reports (by its path)');
    expect(lines[3]).toMatch(/^permits: granted 1 of 1, remaining .*\(reports\)/);
    // This sandbox may not serve /reports/ (404) or may (200, and its class headers reported for learning).
    expect(lines[4]).toMatch(/^vendor call 1: (404 RESOURCE_NOT_FOUND|200)$/);
    expect(lines.at(-1)).toBe('done: 1 vendor call(s) made under permits');
    await expectNoSecrets(`${stdout}${stderr}`, ['uat-advisor']);
  }, 60_000);
});
