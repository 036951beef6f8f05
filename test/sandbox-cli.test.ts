import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCliOptions } from '../sandbox/cli-options.js';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ConfigurationError } from '../shared/errors.js';
import { call, type Reply } from './support/sandbox-http.js';

const ROOT = join(import.meta.dirname, '..');
const TSX = join(ROOT, 'node_modules/.bin/tsx');
const childEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };

function runCli(args: string[]): ChildProcess {
  return spawn(TSX, ['sandbox/cli.ts', ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });

/** Values that differ between any two runs (tokens, expiries, clocks, request ids) or by design (quiet). */
const VOLATILE = new Set(['accessToken', 'refreshToken', 'exp', 'timestamp', 'requestId', 'reset', 'quiet']);

function normalize(value: unknown, key?: string): unknown {
  if (key !== undefined && VOLATILE.has(key)) return `<${typeof value}>`;
  if (key === 'requestsByToken') return Object.values(value as Record<string, number>).sort();
  if (Array.isArray(value)) return value.map((v) => normalize(v));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, normalize(v, k)]),
    );
  }
  return value;
}

const summary = (reply: Reply) => ({
  status: reply.status,
  contentType: reply.headers.get('content-type'),
  requestId: /^req-[0-9a-f]{16}$/.test(reply.headers.get('x-request-id') ?? ''),
  rateLimit: ['limit', 'remaining', 'reset'].map((h) =>
    /^\d+$/.test(reply.headers.get(`x-ratelimit-${h}`) ?? ''),
  ),
  limit: reply.headers.get('x-ratelimit-limit'),
  retryAfter: /^[1-9]\d*$/.test(reply.headers.get('retry-after') ?? ''),
  body: normalize(reply.body),
});

/** One scripted session touching every kind of answer; returns what a client could compare. */
async function script(url: string): Promise<{ steps: ReturnType<typeof summary>[]; tokens: string[] }> {
  const steps: Reply[] = [];
  const tokens: string[] = [];
  const step = async (method: string, path: string, options: Parameters<typeof call>[3] = {}) => {
    const reply = await call(url, method, path, options);
    steps.push(reply);
    if (typeof reply.body?.accessToken === 'string') tokens.push(reply.body.accessToken);
    return reply;
  };
  const credentials = { username: 'uat-advisor', password: 'uat-advisor-sandbox-pw' };
  const resource = '/users/7/uat-advisor-tenant/serviceKey/c-1';
  const token = (await step('POST', '/restful/login/', { body: credentials })).body.accessToken as string;
  await step('POST', '/restful/login/', { body: { ...credentials, password: 'wrong' } });
  await step('POST', '/restful/login', { body: 'nope' });
  await step('POST', '/restful/login/', { body: { username: 'uat-advisor' } });
  await step('GET', resource);
  await step('GET', resource, { token: 'junk' });
  await step('POST', resource, { token, body: { name: 'Ada' } });
  await step('POST', resource, { token, body: { name: 'Ada' } });
  await step('GET', resource, { token });
  await step('PUT', resource, { token, body: { name: 'Bob' } });
  await step('GET', '/users/7/uat-execution-tenant/serviceKey/c-1', { token });
  await step('GET', '/users/x/uat-advisor-tenant/serviceKey/c-1', { token });
  await step('DELETE', resource, { token });
  await step('GET', resource, { token });
  await step('GET', '/elsewhere', { token });
  await step('POST', '/_sandbox/faults', { body: { errorCode: 'RATE_LIMIT_EXCEEDED' } });
  await step('GET', resource, { token });
  await step('POST', '/_sandbox/faults', { body: { status: 503, target: 'login' } });
  await step('POST', '/restful/login/', { body: credentials });
  await step('POST', '/_sandbox/settings', { body: { invalidatePreviousTokenOnLogin: true } });
  await step('POST', '/restful/login/', { body: credentials });
  await step('GET', resource, { token });
  await step('POST', '/_sandbox/settings', { body: { failureRate: 3 } });
  await step('GET', '/_sandbox/stats');
  return { steps: steps.map(summary), tokens };
}

describe('sandbox CLI', () => {
  let child: ChildProcess;
  let childUrl: string;
  const childStdout: string[] = [];
  let childStderr = '';
  let imported: Sandbox;

  beforeAll(async () => {
    child = runCli(['--port', '0', '--env', 'uat']);
    child.stderr?.on('data', (data: Buffer) => {
      childStderr += data.toString();
    });
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    childUrl = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`sandbox CLI exited with ${code}: ${childStderr}`)));
      lines.on('line', (line) => {
        childStdout.push(line);
        const match = /^sandbox uat listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(childStdout[0] ?? '');
        if (match?.[1] && childStdout.length === 3) resolve(match[1]);
      });
    });
    imported = await startSandbox({ environment: 'uat', quiet: true });
  });
  afterAll(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await imported?.close();
  });

  it('prints the listening line first, then the default users marked sandbox only', () => {
    expect(childStdout[0]).toMatch(/^sandbox uat listening on http:\/\/127\.0\.0\.1:\d+$/);
    expect(childStdout.slice(1)).toEqual([
      expect.stringMatching(/uat-advisor password uat-advisor-sandbox-pw .*\[sandbox only\]$/),
      expect.stringMatching(/uat-execution password uat-execution-sandbox-pw .*\[sandbox only\]$/),
    ]);
  });

  it('answers the same for the same input whether started by the CLI or imported', async () => {
    const fromCli = await script(childUrl);
    const fromImport = await script(imported.url);
    expect(fromCli.steps).toEqual(fromImport.steps);
    expect(fromCli.steps.map((s) => s.status)).toEqual([
      200, 401, 400, 400, 401, 401, 201, 409, 200, 200, 403, 400, 204, 410, 404, 201, 429, 201, 503, 200, 200,
      401, 400, 200,
    ]);
    // The CLI's request log (stderr) names requests, never the tokens it issued.
    expect(childStderr).toMatch(/GET \/elsewhere 404 jti=/);
    for (const token of fromCli.tokens) expect(childStderr).not.toContain(token);
  });

  it('closes cleanly on SIGTERM', async () => {
    child.kill('SIGTERM');
    expect(await exitOf(child)).toBe(0);
    await expect(fetch(`${childUrl}/_sandbox/stats`)).rejects.toThrow();
  });

  it('exits 2 with a clear message on a wrong flag', async () => {
    const wrong = runCli(['--env', 'staging']);
    let stderr = '';
    wrong.stderr?.on('data', (data: Buffer) => {
      stderr += data.toString();
    });
    expect(await exitOf(wrong)).toBe(2);
    expect(stderr).toContain('--env must be one of uat, prod');
  });
});

describe('sandbox CLI options', () => {
  it('defaults to uat on a free port, takes SANDBOX_PORT, and lets --port win', async () => {
    expect(await parseCliOptions([], {})).toEqual({ help: false, environment: 'uat', port: 0, settings: {} });
    expect(await parseCliOptions(['--env', 'prod'], { SANDBOX_PORT: '4010' })).toMatchObject({
      environment: 'prod',
      port: 4010,
    });
    expect(await parseCliOptions(['--port', '4011'], { SANDBOX_PORT: '4010' })).toMatchObject({ port: 4011 });
    expect(await parseCliOptions(['--help'], {})).toEqual({ help: true });
  });

  it('refuses wrong flags, ports and settings files with a ConfigurationError naming them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-cli-'));
    const badJson = join(dir, 'bad.json');
    const badValue = join(dir, 'bad-value.json');
    const badUser = join(dir, 'bad-user.json');
    await writeFile(badJson, '{ nope');
    await writeFile(badValue, JSON.stringify({ latencyMs: -5, windowKind: 'rolling' }));
    await writeFile(badUser, JSON.stringify({ users: [{ username: 'u', password: 'hunter2-secret' }] }));
    const badFamily = join(dir, 'bad-family.json');
    await writeFile(
      badFamily,
      JSON.stringify({ families: [{ name: 'reports', pathPrefix: 'reports', limits: [] }] }),
    );
    for (const [args, env, message] of [
      [['--bogus'], {}, 'bogus'],
      [['--env', 'staging'], {}, '--env'],
      [['--port', 'abc'], {}, '--port'],
      [['--port', '70000'], {}, '--port'],
      [[], { SANDBOX_PORT: '-1' }, 'SANDBOX_PORT'],
      [['extra'], {}, 'extra'],
      [['--settings', join(dir, 'missing.json')], {}, 'cannot read'],
      [['--settings', badJson], {}, 'not valid JSON'],
      [['--settings', badValue], {}, 'latencyMs'],
      [['--settings', badValue], {}, 'windowKind'],
      [['--settings', badUser], {}, 'users.0.tenant'],
      [['--settings', badFamily], {}, 'families.0.pathPrefix'],
    ] as const) {
      const parsing = parseCliOptions([...args], env);
      await expect(parsing).rejects.toBeInstanceOf(ConfigurationError);
      await expect(parsing).rejects.toThrow(message);
    }
    await expect(parseCliOptions(['--settings', badUser], {})).rejects.not.toThrow('hunter2-secret');
  });

  it('reads a settings file of users and mutable settings', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-cli-'));
    const file = join(dir, 'settings.json');
    const user = {
      username: 'alice',
      password: 'alice-pw',
      userKey: 'U1',
      tenant: 't-1',
      companyKey: 'C1',
      executionPlatformKey: 'E1',
      groups: [1],
      roles: ['ADVISOR'],
      defaultCompanyInventorySource: 'MARKET',
      companyRole: 'advisor',
    };
    const settings = {
      users: [user],
      windowKind: 'sliding',
      limits: [{ limit: 3, windowSeconds: 5 }],
      families: [{ name: 'exports', pathPrefix: '/exports/', limits: [{ limit: 1, windowSeconds: 5 }] }],
      latencyMs: 10,
    };
    await writeFile(file, JSON.stringify(settings));
    expect(await parseCliOptions(['--settings', file], {})).toEqual({
      help: false,
      environment: 'uat',
      port: 0,
      settings,
    });
  });
});
