import { type ChildProcess, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect } from 'vitest';
import { FunctionUrlSigner } from '../../client/sigv4.js';
import { startBrokerProcess, stopBrokerProcess } from './local-broker-process.js';

/**
 * examples/python/token_broker_example.py against `npm start` over HTTP on 127.0.0.1, for the tests of the Python
 * consumer: test/python-example.test.ts (`npm test`) and test/python-example-cooldown.test.ts (it waits out a
 * vendor cooldown in real time: `npm run test:long`).
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

export interface QuotaFigures {
  limit: number;
  windowSeconds: number;
  remaining: number;
  used: number;
}

/**
 * Starts `npm start` (its vend URL, its uat sandbox) and finds a python3 with botocore, in the calling describe's
 * hooks. The fields are read once the hooks have run.
 */
export function pythonExampleWorld() {
  let broker: { child: ChildProcess; banner: string } | undefined;
  let python: string | undefined;
  let vendUrl = '';
  let uatSandboxUrl = '';
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

  return {
    get python() {
      return python;
    },
    get vendUrl() {
      return vendUrl;
    },
    get uatSandboxUrl() {
      return uatSandboxUrl;
    },
    get brokerLog() {
      return brokerLog;
    },
    quotaOf,
    runExample,
    expectNoSecrets,
    brokerState,
  };
}
