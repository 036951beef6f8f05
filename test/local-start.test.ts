import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBrokerProcess, TSX } from './support/local-broker-process.js';

const run = promisify(execFile);

describe('npm start (the README quick start)', () => {
  let broker: { child: ChildProcess; banner: string };

  beforeAll(async () => {
    broker = await startBrokerProcess({ BROKER_PORT: '0', LOG_LEVEL: 'warn' });
  }, 60_000);
  afterAll(() => {
    if (broker?.child.exitCode === null) broker.child.kill('SIGKILL');
  });

  it('prints the vend URL, both sandboxes, the local callers, and an example command that returns a token', async () => {
    const { banner } = broker;
    expect(banner).toMatch(/token-broker \(local\) listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(banner).toMatch(/vendor sandbox uat: http:\/\/127\.0\.0\.1:\d+/);
    expect(banner).toMatch(/vendor sandbox prod: http:\/\/127\.0\.0\.1:\d+/);
    expect(banner).toContain('AWS_ACCESS_KEY_ID=AKIALOCALPORTFOLIO01');
    expect(banner).toContain('AWS_ACCESS_KEY_ID=AKIALOCALREPORTING01');
    for (const set of ['uat-advisor', 'uat-execution', 'prod-advisor', 'prod-execution']) {
      expect(banner).toMatch(new RegExp(`${set}\\s+token ready`));
    }
    const command = /^ {2}(curl .+)$/m.exec(banner)?.[1];
    expect(command).toBeDefined();
    const { stdout } = await run('bash', ['-c', command ?? 'false']);
    const body = JSON.parse(stdout) as Record<string, unknown>;
    expect(body.credentialSet).toBe('uat-advisor');
    expect(body.environment).toBe('uat');
    expect(typeof body.accessToken).toBe('string');
    const claims = decodeJwt(String(body.accessToken));
    expect(claims.env).toBe('uat');
    expect(body.expiresAt).toBe(claims.exp);
  });

  it('shuts everything down on Ctrl-C and exits 0', async () => {
    const exited = new Promise<number | null>((resolve) => broker.child.on('exit', (code) => resolve(code)));
    broker.child.kill('SIGINT');
    expect(await exited).toBe(0);
  });
});

describe('npm start with a wrong configuration', () => {
  it('fails at start with a message naming the wrong field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'broker-config-'));
    const config = JSON.parse(readFileSync('local/broker.config.json', 'utf8')) as {
      credentialSets: { environment: string }[];
      credentialsFile: string;
    };
    const first = config.credentialSets[0];
    if (first) first.environment = 'staging';
    config.credentialsFile = join(process.cwd(), 'local/credentials.json');
    const path = join(dir, 'broker.config.json');
    writeFileSync(path, JSON.stringify(config));
    const failed = await run(TSX, ['local/start.ts'], { env: { ...process.env, BROKER_CONFIG: path } }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain('credentialSets[0].environment');
  });

  it('on a port already in use, exits 2 with one line that suggests BROKER_PORT=0', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const { port } = busy.address() as AddressInfo;
    try {
      const failed = await run(TSX, ['local/start.ts'], {
        env: { ...process.env, BROKER_PORT: String(port), LOG_LEVEL: 'error' },
      }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failed?.code).toBe(2);
      expect(failed?.stderr.trim().split('\n')).toEqual([
        `token-broker: port ${port} on 127.0.0.1 is already in use (another npm start?): set BROKER_PORT to a free port, or BROKER_PORT=0 for any free one`,
      ]);
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  });

  it('fails when TIME_SCALE is not a number', async () => {
    const failed = await run(TSX, ['local/start.ts'], { env: { ...process.env, TIME_SCALE: 'fast' } }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain('TIME_SCALE');
  });
});
