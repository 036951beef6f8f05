/**
 * Builds the two installable packages from this repository's sources (`npm run build:packages`, or
 * `npm run build:packages -- --pack` for the tarballs):
 *
 *   dist/client/  @token-broker/client: index.js (one minified ESM bundle + map), testing.js (`/testing`: the test
 *                 double), types/ (declarations), package.json, README.md (client/README.md), CHANGELOG.md,
 *                 THIRD_PARTY_LICENSES.md
 *   dist/cli/     @token-broker/cli: token-broker.mjs (`#!/usr/bin/env node`; ESM, with chunks/ that it loads
 *                 per command, and maps), package.json, README.md, CHANGELOG.md, THIRD_PARTY_LICENSES.md
 *
 * Layout choice: a build output with its own package.json per package, not npm workspaces. client/ and cli/
 * import shared/ (and cli/ imports infra/) by relative path, so as workspaces they would need shared/ as a
 * third package, a move of the server's code and a change of every import; the repository would also stop
 * being one package whose `npm ci && npm test` runs as it is. Here the repository stays the private server
 * package, and each built package carries only what it ships: our code bundled by esbuild (client/, the
 * parts of shared/ it uses, cli/, the stage files of infra/), and as real, declared npm dependencies only the
 * third-party packages the bundle imports at run time (checked below: an import that is not declared fails
 * the build). zod and jose are bundled too: used only inside, absent from the declarations, zero-dependency,
 * and zod alone would add 8 MB to every consumer; the client bundles the SigV4 signer as well (CLIENT_BUNDLED).
 * Every bundled package's licence ships in THIRD_PARTY_LICENSES.md. The AWS SDK's credential chain is an
 * optional peer of the client and a dependency of the CLI (DEFAULT_CHAIN).
 *
 * The manifests: packaging/client.package.json (with its `exports`, checked here against the files written) and
 * cli.package.json, completed here with engines and the dependencies the bundle imports.
 *
 * Declarations: tsc (the project's, emitDeclarationOnly) from client/index.ts and client/testing.ts; only the files
 * reachable from their .d.ts are kept, and they may import no package at all: a consumer's tsc checks them
 * (skipLibCheck off) with nothing but the client installed. test/packages.test.ts installs both packed
 * packages into bare projects and uses them as a service and an operator would.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BuildOptions, build, type Metafile, type Plugin } from 'esbuild';
import { gitCommit } from '../cli/version.js';
import { DEFAULT_CHAIN } from '../client/aws-auth.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The oldest Node each package runs on: test/packages.test.ts runs both on the machine's older Node too. */
export const NODE_RANGE = '>=20';
const TARGET = 'node20';

/** Bundled in (see above); their licence files are copied next to the bundle. */
const BUNDLED_THIRD_PARTY = ['zod', 'jose'];

/**
 * The client bundles the SigV4 signer too (with the parts of @smithy/core and @aws-crypto it uses): as a
 * dependency, @smithy/signature-v4 brings all of @smithy/core (6.8 MB, most of it type declarations and two
 * builds) for a few functions, and the client would install as 11 packages and 10.6 MiB instead of 1 and about
 * 1 MiB. The signer is an algorithm with no state or configuration; a fix reaches consumers with the client's
 * next version.
 */
const CLIENT_BUNDLED = [...BUNDLED_THIRD_PARTY, '@smithy/signature-v4', '@aws-crypto/sha256-js'];

interface RootManifest {
  version: string;
  dependencies: Record<string, string>;
}

const rootManifest = (): RootManifest =>
  JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as RootManifest;

/** The bare package name of an import specifier: `@scope/name/sub` → `@scope/name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

const isBuiltin = (specifier: string) =>
  specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));

/**
 * The packages' npm dependencies: the third-party imports left in the bundle, at the root package.json's
 * version (a caret range, so that a consumer's own AWS SDK dedupes them). An import the root does not
 * declare fails the build.
 */
function dependenciesOf(metafile: Metafile): Record<string, string> {
  const versions = rootManifest().dependencies;
  const names = new Set<string>();
  for (const input of Object.values(metafile.inputs))
    for (const im of input.imports) {
      // `<runtime>`: esbuild's own helpers (keepNames' __name); `<define:…>`: an object `define` (the CLI's
      // version), which esbuild writes once as a module of the bundle. Neither is a package.
      if (im.external && !isBuiltin(im.path) && !/^<(runtime|define:[\w$]+)>$/.test(im.path))
        names.add(packageOf(im.path));
    }
  const dependencies: Record<string, string> = {};
  for (const name of [...names].sort()) {
    const version = versions[name];
    if (!version) throw new Error(`the bundle imports ${name}, which package.json's dependencies lack`);
    dependencies[name] = /^\d/.test(version) ? `^${version}` : version;
  }
  return dependencies;
}

/**
 * The range of the AWS SDK's default credential chain (DEFAULT_CHAIN, at the root package.json's version): the
 * client loads it by name when no credentials are given and none are in the environment (client/aws-auth.ts),
 * so the bundle's imports do not show it. An optional peer of the client (a service on the AWS SDK, and Lambda's
 * Node.js runtime, already have it: about 20 packages, 8 MB that a consumer need not install twice); a
 * dependency of the CLI, whose operators sign in with profiles and SSO.
 */
function defaultChainRange(): string {
  const version = rootManifest().dependencies[DEFAULT_CHAIN];
  if (!version) throw new Error(`package.json's dependencies lack ${DEFAULT_CHAIN}`);
  return `^${version}`;
}

/** The packages' externals: every npm package except the bundled ones. */
function externals(bundled: readonly string[] = BUNDLED_THIRD_PARTY): string[] {
  return Object.keys(rootManifest().dependencies)
    .filter((name) => !bundled.includes(name))
    .flatMap((name) => [name, `${name}/*`]);
}

/** The npm packages whose code esbuild put into the bundle, by name: each one's licence ships with it. */
function bundledPackages(metafile: Metafile): string[] {
  const names = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const at = input.lastIndexOf('node_modules/');
    if (at >= 0) names.add(packageOf(input.slice(at + 'node_modules/'.length)));
  }
  return [...names].sort();
}

function thirdPartyLicenses(outDir: string, metafile: Metafile): void {
  const parts = bundledPackages(metafile).map((name) => {
    const dir = path.join(ROOT, 'node_modules', name);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      version: string;
      license?: string;
    };
    const file = ['LICENSE', 'LICENSE.md', 'LICENSE.txt'].find((f) => existsSync(path.join(dir, f)));
    if (!file) throw new Error(`${name} has no licence file`);
    return `## ${name} ${manifest.version} (${manifest.license ?? 'see below'})\n\n${readFileSync(path.join(dir, file), 'utf8').trim()}\n`;
  });
  writeFileSync(
    path.join(outDir, 'THIRD_PARTY_LICENSES.md'),
    `# Third-party code bundled in this package\n\n${parts.join('\n')}`,
  );
}

function writeManifest(outDir: string, manifest: Record<string, unknown>): void {
  writeFileSync(path.join(outDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** Relative imports of a declaration file, resolved to declaration files; bare ones returned apart. */
function declarationImports(file: string): { local: string[]; bare: string[] } {
  const text = readFileSync(file, 'utf8');
  const local: string[] = [];
  const bare: string[] = [];
  for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)'([^']+)'/g)) {
    const specifier = match[1] ?? '';
    if (specifier.startsWith('.'))
      local.push(path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.d.ts')));
    else bare.push(specifier);
  }
  return { local, bare };
}

/** The client package's entries: `.` and `./testing` (packaging/client.package.json's `exports`). */
const CLIENT_ENTRIES = ['client/index.ts', 'client/testing.ts'];

/**
 * tsc's declarations of the package's entries (client/index.ts, client/testing.ts), then only those the entries
 * reach, under `<outDir>/types`.
 */
function clientDeclarations(outDir: string): void {
  const emitted = path.join(tmpdir(), `token-broker-types-${process.pid}-${Date.now()}`);
  const tsconfig = path.join(emitted, 'tsconfig.json');
  mkdirSync(emitted, { recursive: true });
  try {
    writeFileSync(
      tsconfig,
      JSON.stringify({
        extends: path.join(ROOT, 'tsconfig.json'),
        compilerOptions: {
          noEmit: false,
          declaration: true,
          emitDeclarationOnly: true,
          outDir: path.join(emitted, 'out'),
          rootDir: ROOT,
          typeRoots: [path.join(ROOT, 'node_modules/@types')],
        },
        include: [],
        files: CLIENT_ENTRIES.map((entry) => path.join(ROOT, entry)),
      }),
    );
    execFileSync(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', tsconfig], { cwd: ROOT, stdio: 'pipe' });
    const reached = new Set<string>();
    const queue = CLIENT_ENTRIES.map((entry) => path.join(emitted, 'out', entry.replace(/\.ts$/, '.d.ts')));
    while (queue.length > 0) {
      const file = queue.pop() as string;
      if (reached.has(file)) continue;
      reached.add(file);
      const { local, bare } = declarationImports(file);
      if (bare.length > 0) {
        throw new Error(
          `${path.relative(emitted, file)} imports ${bare.join(', ')}: the client's declarations must be self-contained`,
        );
      }
      queue.push(...local);
    }
    for (const file of reached) {
      const target = path.join(outDir, 'types', path.relative(path.join(emitted, 'out'), file));
      mkdirSync(path.dirname(target), { recursive: true });
      copyFileSync(file, target);
    }
  } finally {
    rmSync(emitted, { recursive: true, force: true });
  }
}

/**
 * Where esbuild breaks the minified client's lines (`lineLimit`: at the first place it may past this column).
 * 100 rather than 200: at 200, 37 lines still ran past 400 characters (up to 1334), several of them our throw
 * sites; at 100, every line of our code is under about 330 and only three of zod's long regular expressions pass
 * 400. It costs a newline per line: 192 KB instead of 190 KB. Not minifying whitespace instead: 282 KB.
 */
const CLIENT_LINE_LIMIT = 100;

/**
 * The client bundle's esbuild options (also the bench's and test/client-exports.test.ts's). A consumer loads it
 * at cold start, so it is small:
 * - minified, with names kept: every error's `name` is its class's (`this.name = new.target.name`), which
 *   callers log and switch on;
 * - the bundled packages' ES module builds (`module` before `main`, as the functions' bundles do): esbuild
 *   drops what the client does not use; their CommonJS builds are kept whole (all of @smithy/core for the
 *   signer's few functions: 330 KB of the 720 KB before).
 * `minify: false`: the bundle as it was before, for the bench's before/after.
 */
export function clientBundleOptions(outfile: string, options: { minify?: boolean } = {}): BuildOptions {
  const minify = options.minify ?? true;
  return {
    entryPoints: [path.join(ROOT, 'client/index.ts')],
    outfile,
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: TARGET,
    // Unminified: the bundle as it was before (esbuild's default order for Node, names as written).
    mainFields: minify ? ['module', 'main'] : ['main', 'module'],
    minify,
    keepNames: minify,
    // Short lines: Node prints the source line an uncaught error was thrown from (and a caret line as wide),
    // which on one-line minified code was a 94 KB line burying the error's own message.
    ...(minify ? { lineLimit: CLIENT_LINE_LIMIT } : {}),
    external: externals(CLIENT_BUNDLED),
    // Some bundled AWS packages are CommonJS and require Node built-ins (buffer): an ESM bundle has no
    // `require` of its own, so it gets Node's, for its own URL.
    banner: {
      js: "import { createRequire as __tokenBrokerRequire } from 'node:module'; const require = __tokenBrokerRequire(import.meta.url);",
    },
    sourcemap: true,
    sourcesContent: true,
    metafile: true,
    logLevel: 'warning',
  };
}

/**
 * `@token-broker/client/testing` (client/testing.ts): FakeBrokerClient, for services' unit tests. Its imports of the
 * package entry stay imports of `./index.js`, the bundle beside it, so that it throws the very error classes a
 * service imports from `@token-broker/client` (`instanceof` holds) and carries no copy of the client. Not minified:
 * test code, read in a service's stack traces; it has no third-party code.
 */
function testingBundleOptions(outfile: string): BuildOptions {
  const entryBeside: Plugin = {
    name: 'package-entry-beside',
    setup(b) {
      b.onResolve({ filter: /^\.\/index\.js$/ }, (args) =>
        args.importer === path.join(ROOT, 'client/testing.ts')
          ? { path: './index.js', external: true }
          : undefined,
      );
    },
  };
  return {
    entryPoints: [path.join(ROOT, 'client/testing.ts')],
    outfile,
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: TARGET,
    plugins: [entryBeside],
    logLevel: 'warning',
  };
}

/** Builds @token-broker/client into `outDir` (emptied first); returns the directory. */
export async function buildClient(outDir = path.join(ROOT, 'dist/client')): Promise<string> {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const result = await build({ ...clientBundleOptions(path.join(outDir, 'index.js')), metafile: true });
  await build(testingBundleOptions(path.join(outDir, 'testing.js')));
  clientDeclarations(outDir);
  const template = JSON.parse(
    readFileSync(path.join(ROOT, 'packaging/client.package.json'), 'utf8'),
  ) as Record<string, unknown> & { exports: Record<string, string | Record<string, string>> };
  const missing = Object.values(template.exports)
    .flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))
    .filter((target) => target !== './package.json' && !existsSync(path.join(outDir, target)));
  if (missing.length > 0)
    throw new Error(`the client's exports name files the build did not write: ${missing}`);
  writeManifest(outDir, {
    ...template,
    engines: { node: NODE_RANGE },
    dependencies: dependenciesOf(result.metafile),
    peerDependencies: { [DEFAULT_CHAIN]: defaultChainRange() },
    peerDependenciesMeta: { [DEFAULT_CHAIN]: { optional: true } },
  });
  copyFileSync(path.join(ROOT, 'client/README.md'), path.join(outDir, 'README.md'));
  copyFileSync(path.join(ROOT, 'client/CHANGELOG.md'), path.join(outDir, 'CHANGELOG.md'));
  thirdPartyLicenses(outDir, result.metafile);
  return outDir;
}

/**
 * infra/broker-app.ts is the whole CDK app (aws-cdk-lib, cdk-nag); only `check-config`'s stack checks import
 * it. The package gets cli/standalone/broker-app.ts instead.
 */
const withoutCdkApp: Plugin = {
  name: 'without-cdk-app',
  setup(b) {
    b.onResolve({ filter: /\/infra\/broker-app\.js$/ }, () => ({
      path: path.join(ROOT, 'cli/standalone/broker-app.ts'),
    }));
  },
};

const FORBIDDEN_IN_CLI = [
  'aws-cdk-lib',
  'constructs',
  'cdk-nag',
  'tsx',
  'typescript',
  '@aws-lambda-powertools',
];

/** Builds @token-broker/cli into `outDir` (emptied first); returns the directory. */
export async function buildCli(outDir = path.join(ROOT, 'dist/cli')): Promise<string> {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const template = JSON.parse(readFileSync(path.join(ROOT, 'packaging/cli.package.json'), 'utf8')) as Record<
    string,
    unknown
  > & { version: string };
  const result = await build({
    // token-broker.mjs, and a chunk per command (cli/main.ts imports each when it runs): `--help` loads
    // neither the AWS SDK nor the client.
    entryPoints: { 'token-broker': path.join(ROOT, 'cli/bin.ts') },
    outdir: outDir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: TARGET,
    external: externals(),
    plugins: [withoutCdkApp],
    // `token-broker --version`: the package's version and the commit it is built from (cli/version.ts); the
    // package has neither its repository nor git to ask at run time.
    define: { TOKEN_BROKER_BUILD: JSON.stringify({ version: template.version, commit: gitCommit(ROOT) }) },
    sourcemap: true,
    sourcesContent: true,
    metafile: true,
    logLevel: 'warning',
  });
  const dependencies = { ...dependenciesOf(result.metafile), [DEFAULT_CHAIN]: defaultChainRange() };
  const forbidden = Object.keys(dependencies).filter((name) =>
    FORBIDDEN_IN_CLI.some((f) => name === f || name.startsWith(`${f}/`)),
  );
  if (forbidden.length > 0) throw new Error(`the CLI bundle imports ${forbidden.join(', ')}`);
  writeManifest(outDir, { ...template, engines: { node: NODE_RANGE }, dependencies });
  copyFileSync(path.join(ROOT, 'packaging/cli-README.md'), path.join(outDir, 'README.md'));
  copyFileSync(path.join(ROOT, 'packaging/cli-CHANGELOG.md'), path.join(outDir, 'CHANGELOG.md'));
  thirdPartyLicenses(outDir, result.metafile);
  return outDir;
}

/** `npm pack` of a built package into `destination`; returns the tarball's path. */
export function pack(packageDir: string, destination: string): string {
  mkdirSync(destination, { recursive: true });
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: packageDir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [info] = JSON.parse(out) as { filename: string }[];
  if (!info) throw new Error(`npm pack printed no file: ${out}`);
  return path.join(destination, info.filename);
}

async function main(): Promise<void> {
  const client = await buildClient();
  const cli = await buildCli();
  console.log(`built ${path.relative(ROOT, client)}/ and ${path.relative(ROOT, cli)}/`);
  if (process.argv.includes('--pack')) {
    for (const dir of [client, cli])
      console.log(`packed ${path.relative(ROOT, pack(dir, path.join(ROOT, 'dist')))}`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
