import { type ChildProcess, execFile, execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, buildClient, NODE_RANGE, pack, ROOT } from '../packaging/build.js';
import { ONCALL, PORTFOLIO } from './support/cli-harness.js';
import { startBrokerProcess } from './support/local-broker-process.js';

/**
 * The two packages as their users get them: built from this checkout (packaging/build.ts), packed with
 * `npm pack`, installed with `npm install <tarball>` into bare projects (no TypeScript, no tsx, no dev
 * tooling: the registry, or npm's cache, provides the dependencies), then used: the client's quick start
 * (client/examples/quick-start.mjs, the file client/README.md shows) against a local broker (`npm start`'s
 * local/start.ts) on this Node and on the machine's older one, a TypeScript consumer under the strictest
 * options without skipLibCheck, and the CLI's bin.
 */

const run = promisify(execFile);

/** Node 24 (the project's, running this test) and the machine's own Node when it is an older major. */
const NODE_24 = process.execPath;
function olderNode(): { path: string; version: string } | undefined {
  try {
    const found = execFileSync('/usr/bin/env', ['-i', 'PATH=/usr/local/bin:/usr/bin:/bin', 'which', 'node'], {
      encoding: 'utf8',
    }).trim();
    const version = execFileSync(found, ['--version'], { encoding: 'utf8' }).trim();
    return Number(version.slice(1).split('.')[0]) < Number(process.versions.node.split('.')[0])
      ? { path: found, version }
      : undefined;
  } catch {
    return undefined;
  }
}
const OLDER = olderNode();
/** The oldest major the packages declare (engines.node), which the older Node must be to count. */
const OLDEST_DECLARED = Number(/^>=(\d+)$/.exec(NODE_RANGE)?.[1]);
/** What `token-broker --version` of the built CLI says: its manifest's version, and this checkout's commit. */
const CLI_VERSION = (
  JSON.parse(readFileSync(path.join(ROOT, 'packaging/cli.package.json'), 'utf8')) as { version: string }
).version;
const CHECKOUT_COMMIT = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
  cwd: ROOT,
  encoding: 'utf8',
}).trim();

/** npm's own settings (cache, registry) pass; the repository's `npm test` context does not. */
function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith('npm_') || /^npm_config_(cache|registry|userconfig)$/.test(name),
    ),
  );
}

async function npmInstall(project: string, tarball: string): Promise<void> {
  writeFileSync(
    path.join(project, 'package.json'),
    `${JSON.stringify({ name: path.basename(project), private: true, type: 'module' }, null, 2)}\n`,
  );
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], {
    cwd: project,
    env: npmEnv(),
    timeout: 300_000,
  });
}

/** What `npm ls` lists under the project (every installed package once), and the size of node_modules. */
function installed(project: string): { packages: string[]; kib: number } {
  const out = execFileSync('npm', ['ls', '--all', '--parseable'], {
    cwd: project,
    env: npmEnv(),
    encoding: 'utf8',
  });
  const packages = [
    ...new Set(
      out
        .split('\n')
        .slice(1)
        .filter(Boolean)
        .map((dir) => path.relative(path.join(project, 'node_modules'), dir).split('/node_modules/').at(-1)),
    ),
  ] as string[];
  const kib = Number(
    execFileSync('du', ['-sk', path.join(project, 'node_modules')], { encoding: 'utf8' }).split('\t')[0],
  );
  return { packages, kib };
}

/** The server's packages and the build tools: none may reach a consumer or an operator. */
const SERVER_ONLY = [
  '@aws-sdk/client-dynamodb',
  '@aws-lambda-powertools/logger',
  '@middy/core',
  'aws-cdk-lib',
  'constructs',
  'esbuild',
  'tsx',
  'typescript',
];

let work: string;
let service: string;
let operator: string;
let broker: { child: ChildProcess; banner: string };
let brokerUrl: string;
let cliTarball: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'token-broker-packages-'));
  const [clientDir, cliDir] = await Promise.all([
    buildClient(path.join(work, 'build/client')),
    buildCli(path.join(work, 'build/cli')),
  ]);
  const clientTarball = pack(clientDir, path.join(work, 'tarballs'));
  cliTarball = pack(cliDir, path.join(work, 'tarballs'));
  service = path.join(work, 'service');
  operator = path.join(work, 'operator');
  for (const dir of [service, operator]) execFileSync('mkdir', ['-p', dir]);
  [broker] = await Promise.all([
    startBrokerProcess({ BROKER_PORT: '0', LOG_LEVEL: 'warn' }),
    npmInstall(service, clientTarball),
    npmInstall(operator, cliTarball),
  ]);
  brokerUrl = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(broker.banner)?.[1] ?? '';
}, 600_000);

afterAll(() => {
  if (broker?.child.exitCode === null) broker.child.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A plain child process: only what the test gives, no AWS settings of the machine running the tests. */
function node(binary: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
  return run(binary, args, {
    cwd,
    env: { PATH: `${path.dirname(binary)}:/usr/bin:/bin`, HOME: '/nonexistent', ...env },
    timeout: 60_000,
  }).then(
    ({ stdout, stderr }) => ({ exit: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      exit: typeof error.code === 'number' ? error.code : -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
}

describe('@token-broker/client, installed from its tarball', () => {
  it('brings only its own dependencies: none of the server’s packages, no TypeScript sources', () => {
    const { packages, kib } = installed(service);
    console.log(
      `client for a consumer: ${packages.length} packages, ${(kib / 1024).toFixed(1)} MiB of node_modules (${packages.join(', ')})`,
    );
    expect(packages).toContain('@token-broker/client');
    for (const name of SERVER_ONLY) expect(packages).not.toContain(name);
    const shipped = readdirSync(path.join(service, 'node_modules/@token-broker/client'), {
      recursive: true,
    }).map(String);
    expect(shipped.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
    expect(shipped).toEqual(
      expect.arrayContaining([
        'index.js',
        'index.js.map',
        'types/client/index.d.ts',
        'testing.js',
        'types/client/testing.d.ts',
        'README.md',
        'CHANGELOG.md',
      ]),
    );
    const bundle = readFileSync(path.join(service, 'node_modules/@token-broker/client/index.js'));
    console.log(`client bundle: ${bundle.length} bytes`);
  });

  const nodes = [
    { label: `Node ${process.version} (the project's)`, binary: NODE_24 },
    ...(OLDER ? [{ label: `Node ${OLDER.version} (the machine's older Node)`, binary: OLDER.path }] : []),
  ];
  it.each(nodes)(
    'client/examples/quick-start.mjs runs as written on $label against the local broker',
    async ({ binary }) => {
      copyFileSync(path.join(ROOT, 'client/examples/quick-start.mjs'), path.join(service, 'quick-start.mjs'));
      const result = await node(binary, ['quick-start.mjs'], service, {
        TOKEN_BROKER_URL: brokerUrl,
        AWS_REGION: 'local',
        ...PORTFOLIO,
      });
      expect(result.exit, result.stderr).toBe(0);
      for (const set of ['uat-advisor', 'uat-execution', 'prod-advisor', 'prod-execution']) {
        expect(result.stdout).toMatch(new RegExp(`^credential set ${set} \\((uat|prod)\\): HEALTHY$`, 'm'));
      }
      expect(result.stdout).toMatch(/^POST quick-start-\d+: 201$/m);
      expect(result.stdout).toMatch(/^GET quick-start-\d+: 200 \{"name":"Ada"\}$/m);
      expect(result.stdout).toMatch(/^vendor quota left for this token: \d+ of 50$/m);
      expect(result.stdout).toMatch(/^GET nobody: 404 RESOURCE_NOT_FOUND$/m);
      expect(result.stdout + result.stderr).not.toContain(PORTFOLIO.AWS_SECRET_ACCESS_KEY);
      expect(result.stdout + result.stderr).not.toMatch(/eyJ[\w-]+\./);
    },
  );

  it('client/examples/own-vendor-calls.mjs (the service calls the vendor itself) runs as written against the local broker', async () => {
    copyFileSync(
      path.join(ROOT, 'client/examples/own-vendor-calls.mjs'),
      path.join(service, 'own-vendor-calls.mjs'),
    );
    const result = await node(NODE_24, ['own-vendor-calls.mjs'], service, {
      TOKEN_BROKER_URL: brokerUrl,
      AWS_REGION: 'local',
      ...PORTFOLIO,
    });
    expect(result.exit, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^POST own-calls-\d+: 201$/m);
    expect(result.stdout).toMatch(/^GET own-calls-\d+: 200 \{"name":"Grace"\}$/m);
    expect(result.stdout).toMatch(/^permit not needed, given back: true$/m);
    expect(result.stdout + result.stderr).not.toMatch(/eyJ[\w-]+\./);
    // client/README.md shows the file whole.
    const readme = readFileSync(path.join(ROOT, 'client/README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Calling the vendor yourself'));
    expect(/```js\n([\s\S]*?)```/.exec(section)?.[1]).toBe(
      readFileSync(path.join(ROOT, 'client/examples/own-vendor-calls.mjs'), 'utf8'),
    );
  });

  it('without credentials given, in the environment, or the AWS SDK chain installed, says what to install', async () => {
    writeFileSync(
      path.join(service, 'no-credentials.mjs'),
      [
        "import { BrokerClient } from '@token-broker/client';",
        "const broker = new BrokerClient({ brokerUrl: process.env.TOKEN_BROKER_URL, region: 'local' });",
        'try {',
        '  await broker.listCredentialSets();',
        '} catch (error) {',
        "  console.log(error.name + ': ' + error.message);",
        '} finally {',
        '  await broker.close();',
        '}',
      ].join('\n'),
    );
    // The optional peer is not installed in the bare project; the child gets no AWS settings.
    expect(existsSync(path.join(service, 'node_modules/@aws-sdk/credential-provider-node'))).toBe(false);
    const result = await node(NODE_24, ['no-credentials.mjs'], service, { TOKEN_BROKER_URL: brokerUrl });
    expect(result.exit, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(
      "ConfigurationError: credentials: none given, none in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, and the AWS SDK's default chain is not installed (npm install @aws-sdk/credential-provider-node, or pass credentials)",
    );
  });

  it.each(nodes)(
    'an uncaught client error on $label prints a short source line, then the error with its code',
    async ({ binary }) => {
      // A service that does not catch: Node prints the source line the error was thrown from before the error.
      // On the minified bundle's one 94 KB line, that buried the message (packaging/build.ts, lineLimit).
      writeFileSync(
        path.join(service, 'uncaught.mjs'),
        [
          "import { BrokerClient } from '@token-broker/client';",
          'const broker = new BrokerClient({ brokerUrl: process.env.TOKEN_BROKER_URL });',
          "await broker.getToken('no-such-set');",
        ].join('\n'),
      );
      const result = await node(binary, ['uncaught.mjs'], service, {
        TOKEN_BROKER_URL: brokerUrl,
        AWS_REGION: 'local',
        ...PORTFOLIO,
      });
      const longest = Math.max(...result.stderr.split('\n').map((line) => line.length));
      console.log(
        `uncaught error on ${binary}: ${result.stderr.length} bytes of stderr, longest line ${longest}`,
      );
      expect(result.exit).toBe(1);
      expect(result.stderr).toContain(
        'BrokerApiError: broker answered 404 RESOURCE_NOT_FOUND: no credential set "no-such-set"',
      );
      expect(result.stderr.length).toBeLessThan(2000);
      expect(longest).toBeLessThan(400);
    },
  );

  it('client/examples/lambda-handler.mjs, invoked twice as Lambda does, serves both from one module-scope client', async () => {
    copyFileSync(
      path.join(ROOT, 'client/examples/lambda-handler.mjs'),
      path.join(service, 'lambda-handler.mjs'),
    );
    // What the Node.js runtime does: import the handler module once (its cold start), then call the handler once
    // per event with a context, in the same process.
    writeFileSync(
      path.join(service, 'invoke.mjs'),
      [
        "import { handler } from './lambda-handler.mjs';",
        "const key = 'lambda-' + Date.now();",
        "const context = (n) => ({ awsRequestId: 'request-' + n, getRemainingTimeInMillis: () => 3000 });",
        "console.log(JSON.stringify(await handler({ key, name: 'Ada' }, context(1))));",
        'console.log(JSON.stringify(await handler({ key }, context(2))));',
      ].join('\n'),
    );
    const result = await node(NODE_24, ['invoke.mjs'], service, {
      TOKEN_BROKER_URL: brokerUrl,
      AWS_REGION: 'local',
      ...PORTFOLIO,
    });
    expect(result.exit, result.stderr).toBe(0);
    expect(
      result.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { statusCode: 201, body: { name: 'Ada' }, requestId: 'request-1' },
      { statusCode: 200, body: { name: 'Ada' }, requestId: 'request-2' },
    ]);
    expect(result.stdout + result.stderr).not.toMatch(/eyJ[\w-]+\./);
  });

  it.each(nodes)(
    'client/examples/testing.test.mjs (FakeBrokerClient from @token-broker/client/testing) passes under node --test on $label',
    async ({ binary }) => {
      copyFileSync(
        path.join(ROOT, 'client/examples/testing.test.mjs'),
        path.join(service, 'testing.test.mjs'),
      );
      // No broker, no AWS settings: the double needs neither.
      const result = await node(binary, ['--test', '--test-reporter=tap', 'testing.test.mjs'], service, {});
      expect(result.exit, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toMatch(/^# pass 6$/m);
      expect(result.stdout).toMatch(/^# fail 0$/m);
    },
  );

  it('client/README.md shows the quick start as the file has it', () => {
    const readme = readFileSync(path.join(ROOT, 'client/README.md'), 'utf8');
    const shown = /```js\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const file = readFileSync(path.join(ROOT, 'client/examples/quick-start.mjs'), 'utf8');
    const lines = shown
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.includes('// … (the file goes on'));
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) expect(file.split('\n'), 'a line client/README.md shows').toContain(line);
  });

  it('README.md’s example (“Using the broker from a service”) runs as written', async () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Using the broker from a service'));
    const example = /```js\n([\s\S]*?)```/.exec(section)?.[1];
    expect(example).toContain("from '@token-broker/client'");
    writeFileSync(path.join(service, 'readme-example.mjs'), example ?? '');
    const result = await node(NODE_24, ['readme-example.mjs'], service, {
      TOKEN_BROKER_URL: brokerUrl,
      AWS_REGION: 'local',
      ...PORTFOLIO,
    });
    expect(result.exit, result.stderr).toBe(0);
    expect(result.stdout).toBe("201 { name: 'Ada' }\n");
  });

  // Said in the test's name and output either way: the older-Node runs exist only when such a Node was found.
  it(
    OLDER
      ? `the machine's older Node (${OLDER.version}) is the oldest major the packages declare (node ${NODE_RANGE})`
      : `NO NODE OLDER THAN ${process.version} ON THIS MACHINE: the packages ran on ${process.version} only; node ${NODE_RANGE} is untested below it`,
    () => {
      console.log(
        OLDER
          ? `older Node: ${OLDER.version} at ${OLDER.path}; the packages declare node ${NODE_RANGE}`
          : `no Node older than ${process.version} found (PATH=/usr/local/bin:/usr/bin:/bin): the client and the CLI ran on ${process.version} only, not on the oldest Node they declare (node ${NODE_RANGE})`,
      );
      if (OLDER) expect(Number(OLDER.version.slice(1).split('.')[0])).toBe(OLDEST_DECLARED);
    },
  );

  it('type-checks in a TypeScript consumer: strict, exactOptionalPropertyTypes, noPropertyAccessFromIndexSignature, no skipLibCheck', async () => {
    writeFileSync(
      path.join(service, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2022'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          exactOptionalPropertyTypes: true,
          noPropertyAccessFromIndexSignature: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          noEmit: true,
          // A Node service's @types/node (the client's declarations name fetch and AbortSignal); the
          // project itself has no dev tooling, so the repository's copy stands in for the service's.
          types: ['node'],
          typeRoots: [path.join(ROOT, 'node_modules/@types')],
        },
        files: ['consumer.ts'],
      }),
    );
    writeFileSync(
      path.join(service, 'consumer.ts'),
      `import { FakeBrokerClient } from '@token-broker/client/testing';
import {
  BrokerApiError,
  BrokerClient,
  type BrokerClientApi,
  type BrokerClientOptions,
  ConfigurationError,
  type PermitHandle,
  type PermitPriority,
  powertoolsTelemetry,
  type RateLimitReportResult,
  type Telemetry,
  type VendedToken,
  VendorApiError,
} from '@token-broker/client';

const url = process.env['TOKEN_BROKER_URL'];
if (!url) throw new Error('TOKEN_BROKER_URL');
const options: BrokerClientOptions = { brokerUrl: url, region: 'local', maxPermitWaitMs: 5_000 };
const broker = new BrokerClient(options);
const token: VendedToken = await broker.getToken('uat-advisor', { minValiditySeconds: 600 });
const id: string = token.tokenId;
const response = await broker.vendorRequest<{ name: string }>('uat-advisor', {
  method: 'GET',
  path: (t) => \`/users/1/\${t.tenant}/serviceKey/x\`,
});
const name: string = response.body.name;
const remaining: number | undefined = response.rateLimit.remaining;
const priority: PermitPriority = 'batch';
try {
  await broker.acquirePermit('uat-advisor', id);
  const permit: PermitHandle = await broker.acquirePermit('uat-advisor', id, { priority, maxWaitMs: 1_000 });
  const back: boolean = permit.giveBack();
  const report: RateLimitReportResult = await broker.reportRateLimit('uat-advisor', id, { status: 200, headers: {} });
  const next: VendedToken = await broker.reportRejection('uat-advisor', { tokenId: id, errorCode: 'TOKEN_EXPIRED' });
  console.log(back, report.reported, next.tokenId);
} catch (error) {
  if (error instanceof ConfigurationError) console.log(error.code);
  if (error instanceof BrokerApiError) console.log(error.code, error.requestId);
  if (error instanceof VendorApiError) console.log(error.status, error.code);
}
const quiet: Telemetry = { debug() {}, info() {}, warn() {}, error() {}, metric() {} };
new BrokerClient({ brokerUrl: url, telemetry: quiet });
// A Powertools-shaped logger (the package needs no Powertools: structural types).
const lines: string[] = [];
const logger = { debug: (m: string) => lines.push(m), info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m), error: (m: string) => lines.push(m) };
new BrokerClient({ brokerUrl: url, telemetry: powertoolsTelemetry({ logger }) });
// The test double stands where the client does, for code that takes a BrokerClientApi.
const double: BrokerClientApi = new FakeBrokerClient({ sets: ['uat-advisor'] }).refuse('uat-advisor', 503);
const fakeToken: VendedToken = await double.getToken('uat-advisor').catch(() => token);
console.log(name, remaining, fakeToken.tokenId);
// The declarations are real types, not any: each of these is an error.
// @ts-expect-error PATCH is not a method the vendor has
await broker.vendorRequest('uat-advisor', { method: 'PATCH', path: '/x' });
// @ts-expect-error exactOptionalPropertyTypes: an optional option is absent or a string, never undefined
new BrokerClient({ brokerUrl: url, region: undefined });
// @ts-expect-error a priority is 'interactive' or 'batch'
await broker.acquirePermit('uat-advisor', id, { priority: 'urgent' });
// @ts-expect-error only the two codes that mean the token itself was refused
await broker.reportRejection('uat-advisor', { tokenId: id, errorCode: 'TOKEN_MISSING' });
// @ts-expect-error the token is read-only
token.accessToken = '';
await broker.close();
`,
    );
    const tsc = path.join(ROOT, 'node_modules/.bin/tsc');
    const check = await run(tsc, ['-p', 'tsconfig.json'], { cwd: service }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(check).toBe('');
    // What that tsc read of the package: declarations only, never our TypeScript sources.
    const { stdout } = await run(tsc, ['-p', 'tsconfig.json', '--listFilesOnly'], { cwd: service });
    const fromPackage = stdout
      .split('\n')
      .filter((file) => file.includes('/node_modules/@token-broker/client/'));
    expect(fromPackage.length).toBeGreaterThan(0);
    expect(fromPackage.filter((file) => !file.endsWith('.d.ts'))).toEqual([]);
  });
});

describe('@token-broker/cli, installed from its tarball', () => {
  it('brings no TypeScript runner, no compiler and no CDK', () => {
    const { packages, kib } = installed(operator);
    console.log(
      `CLI for an operator: ${packages.length} packages, ${(kib / 1024).toFixed(1)} MiB of node_modules`,
    );
    expect(packages).toContain('@token-broker/cli');
    for (const name of SERVER_ONLY) expect(packages).not.toContain(name);
    expect(existsSync(path.join(operator, 'node_modules/.bin/token-broker'))).toBe(true);
  });

  const nodes = [
    { label: `Node ${process.version}`, binary: NODE_24 },
    ...(OLDER ? [{ label: `Node ${OLDER.version}`, binary: OLDER.path }] : []),
  ];
  it.each(nodes)(
    'token-broker --help (the bin, #!/usr/bin/env node) on $label prints the usage, exit 0',
    async ({ binary }) => {
      // The bin as a shell runs it: its shebang finds `node` on PATH, which puts this Node first.
      const help = await run(path.join(operator, 'node_modules/.bin/token-broker'), ['--help'], {
        cwd: operator,
        env: { PATH: `${path.dirname(binary)}:/usr/bin:/bin`, HOME: '/nonexistent' },
      });
      expect(help.stdout).toMatch(/^Usage: token-broker <command> \[options\]/);
      for (const command of [
        'token <set>',
        'status [<set>...]',
        'check-config <stage>',
        'put-credentials <set>',
      ]) {
        expect(help.stdout).toContain(command);
      }
      expect(help.stderr).toBe('');
      // The version and commit built in (esbuild's define): the package has no git to ask.
      const version = await run(path.join(operator, 'node_modules/.bin/token-broker'), ['--version'], {
        cwd: operator,
        env: { PATH: `${path.dirname(binary)}:/usr/bin:/bin`, HOME: '/nonexistent' },
      });
      expect(version.stdout).toBe(`token-broker ${CLI_VERSION} (commit ${CHECKOUT_COMMIT})\n`);
    },
  );

  it('the documented npx lines (packaging/cli-README.md, docs/runbook.md) run without a terminal, from the tarball', async () => {
    // Where the docs say: a directory with the tarball in it, nothing installed; stdin is no terminal, so npx
    // cannot ask whether to install the package and must be told (-y).
    const empty = path.join(work, 'empty');
    execFileSync('mkdir', ['-p', empty]);
    copyFileSync(cliTarball, path.join(empty, path.basename(cliTarball)));
    const documented = ['packaging/cli-README.md', 'docs/runbook.md'].map((doc) => {
      const text = readFileSync(path.join(ROOT, doc), 'utf8');
      const line = /(npx (?:\S+ )*--package=\S+ token-broker \S+)/.exec(text)?.[1];
      expect(line, doc).toBeDefined();
      return line ?? '';
    });
    for (const line of documented) {
      expect(line).toContain(`--package=./${path.basename(cliTarball)} `);
      const ran = await run('sh', ['-c', line], {
        cwd: empty,
        // The registry's metadata from npm's cache, as the other installs here (npm_config_prefer_offline is
        // --prefer-offline): the line itself stays as documented.
        env: {
          ...npmEnv(),
          npm_config_prefer_offline: 'true',
          TOKEN_BROKER_URL: brokerUrl,
          AWS_REGION: 'local',
          ...ONCALL,
        },
        timeout: 300_000,
      }).then(
        (done) => ({ exit: 0, ...done }),
        (error: { code: number; stdout: string; stderr: string }) => ({ exit: error.code, ...error }),
      );
      expect(ran.exit, `${line}\n${ran.stderr}`).toBe(0);
      expect(ran.stdout).toMatch(
        line.endsWith('--help') ? /^Usage: token-broker <command> \[options\]/ : /^SET\s+STATE\s/,
      );
    }
  });

  it.each(nodes)(
    'token-broker status as the on-call operator on $label, against the local broker',
    async ({ binary }) => {
      const status = await node(
        binary,
        [path.join(operator, 'node_modules/.bin/token-broker'), 'status'],
        operator,
        {
          TOKEN_BROKER_URL: brokerUrl,
          AWS_REGION: 'local',
          ...ONCALL,
        },
      );
      expect(status.exit, status.stderr).toBe(0);
      expect(status.stdout.split('\n')[0]).toMatch(/^SET\s+STATE\s+EXPIRES IN\s+AGE\s+QUOTA USED\s+CAUSE$/);
      expect(status.stdout).toMatch(/^uat-advisor\s+HEALTHY\s/m);
      expect(status.stdout + status.stderr).not.toContain(ONCALL.AWS_SECRET_ACCESS_KEY);
    },
  );

  it('check-config runs the schema checks offline and says the stack’s own checks need the repository', async () => {
    const check = await node(
      NODE_24,
      [path.join(operator, 'node_modules/.bin/token-broker'), 'check-config', 'uat'],
      operator,
      {},
    );
    expect(check.exit, check.stderr).toBe(0);
    expect(check.stdout).toMatch(/^stage uat: valid$/m);
    expect(check.stderr).toContain(
      "note: the stack's own checks (those `cdk synth` makes) need the repository",
    );
  });
});
