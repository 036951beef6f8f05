import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { functionConfigDocuments, parseStageConfig } from '../infra/stage-config.js';
import { uat } from '../infra/stages/uat.js';
import { BUNDLE_BUDGET_KIB, formatInputs, largestInputs } from '../infra/tools/bundle-contents.js';
import { ZOD_FUNCTIONS_FILE } from '../shared/aws/bundle/zod-functions-file.js';
import { BROKER_CONFIG_FILE, brokerConfigText, configRevision } from '../shared/config/broker-config.js';

/**
 * The real bundling `cdk synth` does (local esbuild, no Docker, offline), for one stage: what Lambda would
 * run is a CommonJS bundle that a fresh Node 24 process can import with the environment the stack gives it.
 */
interface FunctionResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Handler: string; Environment: { Variables: Record<string, unknown> } };
}

const outdir = mkdtempSync(path.join(tmpdir(), 'infra-bundle-'));
let bundles: { id: string; dir: string; env: Record<string, string>; handler: string }[] = [];

beforeAll(() => {
  const { app } = createBrokerApp({
    // The CLI's defaults: bundle every stack, and record where each asset is.
    context: { stage: 'uat', 'aws:cdk:enable-asset-metadata': true },
    outdir,
  });
  const assembly = app.synth();
  const template = assembly.getStackByName('TokenBroker-uat').template as {
    Resources: Record<string, FunctionResource>;
  };
  bundles = Object.entries(template.Resources)
    .filter(([, r]) => r.Type === 'AWS::Lambda::Function')
    .map(([id, r]) => ({
      id,
      dir: path.join(outdir, String(r.Metadata?.['aws:asset:path'])),
      handler: r.Properties.Handler,
      // Resource names are CloudFormation references until deployment: placeholders stand in for them.
      env: Object.fromEntries(
        Object.entries(r.Properties.Environment.Variables).map(([name, value]) => [
          name,
          typeof value === 'string' ? value : `placeholder-${name.toLowerCase()}`,
        ]),
      ),
    }));
}, 120_000);

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

/**
 * Runs `probe` (an ES module body; `BUNDLE` is the bundle's file URL) in a fresh Node process with the
 * environment Lambda gives the function: the stack's variables, and LAMBDA_TASK_ROOT, the asset's directory,
 * where the configuration document is found. Returns what it printed; throws when it fails.
 */
function runWithBundle(
  bundle: { dir: string; env: Record<string, string> },
  probe: string,
  env: Record<string, string> = {},
): string {
  const url = pathToFileURL(path.join(bundle.dir, 'index.js')).href;
  return execFileSync(
    process.execPath,
    ['--input-type=module', '-e', `const BUNDLE = ${JSON.stringify(url)};\n${probe}`],
    {
      env: {
        PATH: process.env.PATH ?? '',
        AWS_REGION: 'eu-west-1',
        LAMBDA_TASK_ROOT: bundle.dir,
        ...bundle.env,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  ).toString();
}

describe('function bundles', () => {
  it('bundles both functions', () => {
    expect(bundles.map((b) => b.handler)).toEqual(['index.handler', 'index.handler']);
  });

  it('are minified CommonJS with a source map, with every dependency inside', () => {
    for (const bundle of bundles) {
      const code = readFileSync(path.join(bundle.dir, 'index.js'), 'utf8');
      expect(code.startsWith('"use strict";')).toBe(true);
      // CommonJS: Node built-ins are required where they are used, never linked as ESM imports at load.
      expect(code).not.toMatch(/\bfrom\s*["']node:/);
      expect(code).toMatch(/\/\/# sourceMappingURL=index\.js\.map\s*$/);
      const map = JSON.parse(readFileSync(path.join(bundle.dir, 'index.js.map'), 'utf8'));
      expect(map.sources.some((s: string) => s.includes('functions/'))).toBe(true);
      expect(map.sourcesContent).toBeUndefined();
      // Minified: long lines (a readable bundle averages well under 100 characters a line). Self-contained: no
      // import of a package left for the runtime to provide.
      expect(code.length / code.split('\n').length).toBeGreaterThan(2000);
      expect(code).not.toMatch(/from\s*["'](@aws-sdk|@smithy|@aws-lambda-powertools|@middy|zod)/);
    }
  });

  it('start in a fresh Node 24 process with the environment the stack gives them', () => {
    for (const bundle of bundles) {
      const output = runWithBundle(
        bundle,
        'const m = await import(BUNDLE); process.stdout.write(typeof m.handler);',
      );
      // The cold start logs which configuration it runs (Powertools writes JSON lines to stdout), then the probe.
      const lines = output.trimEnd().split('\n');
      expect(lines.at(-1), bundle.id).toMatch(/function$/);
      expect(JSON.parse(lines[0] ?? '{}'), bundle.id).toMatchObject({
        message: 'configuration loaded',
        configRevision: bundle.env.BROKER_CONFIG_REVISION,
      });
    }
  });

  it('carry the configuration document the template names, and refuse to start with another', () => {
    const documents = functionConfigDocuments(parseStageConfig(uat));
    const byRevision = new Map(
      Object.values(documents).map((document) => [configRevision(brokerConfigText(document)), document]),
    );
    for (const bundle of bundles) {
      const shipped = JSON.parse(readFileSync(path.join(bundle.dir, BROKER_CONFIG_FILE), 'utf8'));
      expect(shipped, bundle.id).toEqual(byRevision.get(bundle.env.BROKER_CONFIG_REVISION ?? ''));
    }
    expect(new Set(bundles.map((b) => b.env.BROKER_CONFIG_REVISION)).size).toBe(2);
    const [bundle] = bundles;
    if (!bundle) throw new Error('no bundle');
    const run = (env: Record<string, string>) => () => runWithBundle(bundle, 'await import(BUNDLE);', env);
    expect(run({ BROKER_CONFIG_REVISION: '0123456789abcdef' })).toThrow(
      /invalid configuration: broker-config\.json is revision [0-9a-f]{16}, the function was deployed with 0123456789abcdef \(changed after synth\?\)/,
    );
    expect(run({ LAMBDA_TASK_ROOT: outdir })).toThrow(
      /invalid configuration: the configuration document .*broker-config\.json cannot be read \(ENOENT\)/,
    );
  });

  it('give stack traces in the original sources, through the source map, without --enable-source-maps', () => {
    for (const bundle of bundles) {
      // The error a wrong configuration raises at cold start, as the Lambda runtime would log it.
      const stack = runWithBundle(
        bundle,
        'try { await import(BUNDLE); } catch (error) { process.stdout.write(error.stack); }',
        { BROKER_CONFIG_REVISION: '0123456789abcdef' },
      );
      const lines = stack.split('\n');
      expect(lines[0], bundle.id).toMatch(/: invalid configuration: broker-config\.json is revision /);
      // The frame that threw, and the entry module's, in the TypeScript sources with their lines.
      expect(lines[1], bundle.id).toMatch(/shared\/config\/broker-config\.ts:\d+:\d+\)$/);
      expect(stack, bundle.id).toMatch(/functions\/(vend-token|refresher)\.ts:\d+:\d+\)/);
      expect(stack, bundle.id).not.toMatch(/index\.js:\d+:\d+/);
    }
  });

  it('carry only the credentials Lambda gives (the environment), no event streams, and SHA-256 from node:crypto alone', () => {
    for (const bundle of bundles) {
      const map = JSON.parse(readFileSync(path.join(bundle.dir, 'index.js.map'), 'utf8'));
      const sources: string[] = map.sources;
      // The stand-ins are in (infra/constructs/broker-function.ts), the modules they replace are not.
      expect(
        sources.some((s) => s.endsWith('shared/aws/bundle/environment-credentials.ts')),
        bundle.id,
      ).toBe(true);
      expect(
        sources.some((s) => s.endsWith('shared/aws/bundle/no-event-streams.ts')),
        bundle.id,
      ).toBe(true);
      expect(
        sources.some((s) => s.endsWith('shared/aws/bundle/endpoint-cache.ts')),
        bundle.id,
      ).toBe(true);
      expect(
        sources.some((s) => s.endsWith('shared/aws/bundle/native-sha256.ts')),
        bundle.id,
      ).toBe(true);
      for (const gone of [
        '@aws-sdk/credential-provider-node/',
        '@aws-sdk/credential-provider-ini/',
        '@aws-sdk/credential-provider-sso/',
        '@aws-sdk/nested-clients/',
        '@smithy/credential-provider-imds/',
        '@smithy/core/dist-es/submodules/event-streams/',
        '@smithy/core/dist-es/submodules/checksum/',
        '@aws-sdk/endpoint-cache/',
        'mnemonist/',
      ]) {
        expect(
          sources.filter((s) => s.includes(gone)),
          `${bundle.id}: ${gone}`,
        ).toEqual([]);
      }
    }
    // The refresher's DynamoDB client signs its first call with the environment's credentials, and without
    // them fails naming them: a local endpoint records the request's Authorization header.
    const refresher = bundles.find((b) => b.id.startsWith('Refresher'));
    if (!refresher) throw new Error('no refresher bundle');
    const probe = `
const { createServer } = await import('node:http');
let authorization = 'none';
const server = createServer((request, response) => {
  authorization = request.headers.authorization ?? 'unsigned';
  response.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
  response.end(JSON.stringify({ __type: 'com.amazon.coral.validate#ValidationException', message: 'recorded' }));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
process.env.AWS_ENDPOINT_URL_DYNAMODB = 'http://127.0.0.1:' + server.address().port;
const { handler } = await import(BUNDLE);
const context = { awsRequestId: 'probe', functionName: 'probe', functionVersion: '1', invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:probe', memoryLimitInMB: '256', getRemainingTimeInMillis: () => 10000 };
let failure = 'none';
try {
  await handler({ action: 'refresh', credentialSetId: 'uat-advisor', reason: 'NO_USABLE_TOKEN' }, context);
} catch (error) {
  failure = error.message;
}
server.close();
process.stdout.write('\\n' + JSON.stringify({ authorization, failure }));
`;
    const result = (env: Record<string, string>) => {
      const output = runWithBundle(refresher, probe, env);
      return JSON.parse(output.slice(output.lastIndexOf('\n') + 1)) as {
        authorization: string;
        failure: string;
      };
    };
    const signed = result({
      AWS_ACCESS_KEY_ID: 'AKIDLAMBDAROLE',
      AWS_SECRET_ACCESS_KEY: 'not-a-secret',
      AWS_SESSION_TOKEN: 'session',
    });
    expect(signed.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDLAMBDAROLE\/\d{8}\/eu-west-1\/dynamodb\//,
    );
    const unsigned = result({});
    expect(unsigned.authorization).toBe('none');
    expect(unsigned.failure).toMatch(/CredentialsProviderError/);
  });

  it(`stay under the size budget (${BUNDLE_BUDGET_KIB} KiB each, with the zod they load on first use), and say what they are made of`, () => {
    for (const bundle of bundles) {
      const file = path.join(bundle.dir, 'index.js');
      const code = readFileSync(file, 'utf8');
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8'));
      const inputs = largestInputs(code, map, bundle.dir, process.cwd());
      const zodBytes = readFileSync(path.join(bundle.dir, ZOD_FUNCTIONS_FILE)).length;
      const kib = (code.length / 1024).toFixed(1);
      console.info(
        [
          `${bundle.id}: ${kib} KiB, and ${(zodBytes / 1024).toFixed(1)} KiB of zod on first use`,
          ...formatInputs(inputs, code.length, 8),
        ].join('\n'),
      );
      // The sizes are deterministic (same sources, same esbuild): a budget, not a timing. All the code Lambda
      // may load counts, the zod a first request loads too.
      expect((code.length + zodBytes) / 1024, bundle.id).toBeLessThanOrEqual(BUNDLE_BUDGET_KIB);
      // Every input is accounted for; zod is not in the bundle (a cold start does not parse it), and beside it
      // without its locales (`import { z }` brings 444 KiB).
      expect(inputs.reduce((sum, input) => sum + input.bytes, 0)).toBe(code.length);
      expect(inputs.find((input) => input.name === 'zod')).toBeUndefined();
      expect(zodBytes / 1024, `${bundle.id}: zod`).toBeLessThan(150);
    }
  });

  it('load zod from beside the bundle when a first schema is built, with its messages', () => {
    const refresher = bundles.find((b) => b.id.startsWith('Refresher'));
    if (!refresher) throw new Error('no refresher bundle');
    // A refresh request with an empty set id: refused by its zod schema, the first one this process builds.
    const output = runWithBundle(
      refresher,
      `const { handler } = await import(BUNDLE);
const context = { awsRequestId: 'probe', functionName: 'probe', functionVersion: '1', invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:probe', memoryLimitInMB: '256', getRemainingTimeInMillis: () => 10000 };
try {
  await handler({ action: 'refresh', credentialSetId: '', reason: 'NO_USABLE_TOKEN' }, context);
  process.stdout.write('\\naccepted');
} catch (error) {
  process.stdout.write('\\n' + error.message);
}`,
    );
    expect(output.slice(output.lastIndexOf('\n') + 1)).toMatch(
      /^invalid refresh request: request\.credentialSetId: Too small: expected string to have >=1 characters$/,
    );
  });
});
