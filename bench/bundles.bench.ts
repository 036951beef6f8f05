/**
 * The functions' cold module init as a ratio to an empty module's import, measured in the same run and
 * interleaved (so the machine's load weighs on both alike): each sample is a fresh Node process importing the
 * bundle `cdk synth` builds (real esbuild bundling, offline) with the environment the stack gives the function
 * and its NODE_OPTIONS. Real time, in-process import: no Lambda runtime, no network.
 *
 * Then what remains of each import, part by part (infra/tools/bundle-init.ts, measureInitBreakdown).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { createBrokerApp } from '../infra/broker-app.js';
import { measureInit, measureInitBreakdown, median } from '../infra/tools/bundle-init.js';

const RUNS = 15;

interface FunctionResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Environment?: { Variables?: Record<string, unknown> } };
}

type Row = Record<string, string | number>;

const ms = (value: number): number => Number(value.toFixed(1));

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const outdir = mkdtempSync(path.join(tmpdir(), 'bench-bundles-'));
  try {
    const { app } = createBrokerApp({
      context: { stage: 'uat', 'aws:cdk:enable-asset-metadata': true },
      outdir,
    });
    const template = app.synth().getStackByName('TokenBroker-uat').template as {
      Resources: Record<string, FunctionResource>;
    };
    const rows: Row[] = [];
    const remains: Row[] = [];
    for (const [id, resource] of Object.entries(template.Resources)) {
      if (resource.Type !== 'AWS::Lambda::Function') continue;
      const bundle = path.join(outdir, String(resource.Metadata?.['aws:asset:path']), 'index.js');
      // Resource names are CloudFormation references until deployment: placeholders stand in for them.
      const environment = Object.fromEntries(
        Object.entries(resource.Properties.Environment?.Variables ?? {}).map(([name, value]) => [
          name,
          typeof value === 'string' ? value : `placeholder-${name.toLowerCase()}`,
        ]),
      );
      // LAMBDA_TASK_ROOT: where Lambda runs the asset from, and finds its configuration document.
      const env = {
        PATH: process.env.PATH ?? '',
        ...environment,
        AWS_REGION: 'eu-west-1',
        LAMBDA_TASK_ROOT: path.dirname(bundle),
      };
      const nodeOptions = (environment.NODE_OPTIONS ?? '').split(' ').filter(Boolean);
      const init = measureInit(bundle, env, nodeOptions, RUNS);
      const emptyMs = median(init.emptyMs);
      rows.push({
        function: id,
        'bundle KiB': Number((readFileSync(bundle).length / 1024).toFixed(1)),
        runs: RUNS,
        'import ms p50': ms(median(init.bundleMs)),
        'empty module ms p50': ms(emptyMs),
        'ratio to empty': Number((median(init.bundleMs) / emptyMs).toFixed(1)),
      });
      const parts = measureInitBreakdown(bundle, env, nodeOptions, RUNS);
      const sourceMapsMs = parts.importMs - parts.importWithoutSourceMapsMs;
      // The rest of the import: the parts add up to it.
      const evaluationMs = parts.importMs - sourceMapsMs - parts.compileMs - parts.builtinsMs;
      const part = (name: string, partMs: number, what: string): Row => ({
        function: id,
        part: name,
        'ms p50': ms(partMs),
        'x empty module': Number((partMs / emptyMs).toFixed(1)),
        what,
      });
      remains.push(
        part(
          'compile',
          parts.compileMs,
          'V8 parses the whole bundle and compiles its top level (functions pre-parsed), before anything runs',
        ),
        part('built-ins', parts.builtinsMs, `Node built-ins loaded: ${parts.builtins.join(' ') || 'none'}`),
        part(
          'evaluation',
          evaluationMs,
          "the bundle's module-scope code (zod schemas and the config parse, SDK clients, Powertools), compiling each function the first time it runs: the rest of the import",
        ),
        // Only when the function runs with --enable-source-maps (its map read and indexed as the bundle loads).
        ...(nodeOptions.includes('--enable-source-maps')
          ? [part('source maps', sourceMapsMs, '--enable-source-maps: import with it less import without')]
          : []),
        part(
          'import',
          parts.importMs,
          'the whole import (each part a median of its own runs; evaluation is what the others leave)',
        ),
      );
    }
    // The yardstick, in the same run: the DynamoDB client alone, bundled with the functions' esbuild options.
    const yardstick = path.join(outdir, 'yardstick', 'index.js');
    buildSync({
      entryPoints: [fileURLToPath(new URL('./yardstick/dynamodb-client-alone.ts', import.meta.url))],
      outfile: yardstick,
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node24',
      mainFields: ['module', 'main'],
      minify: true,
      logLevel: 'error',
    });
    const alone = measureInit(yardstick, { PATH: process.env.PATH ?? '', AWS_REGION: 'eu-west-1' }, [], RUNS);
    rows.push({
      function: 'yardstick: @aws-sdk/client-dynamodb alone (one client, one GetItem path)',
      'bundle KiB': Number((readFileSync(yardstick).length / 1024).toFixed(1)),
      runs: RUNS,
      'import ms p50': ms(median(alone.bundleMs)),
      'empty module ms p50': ms(median(alone.emptyMs)),
      'ratio to empty': Number((median(alone.bundleMs) / median(alone.emptyMs)).toFixed(1)),
    });
    return [
      {
        title:
          "Function cold init, real time, in-process import (fresh Node process, stage environment), as a ratio to an empty module in the same run (each side includes creating process.stdout once: most of the empty module's figure)",
        rows,
      },
      {
        title:
          "What remains of each function import, real time, each part measured in its own fresh Node processes (stage environment), in units of the empty module's import above",
        rows: remains,
      },
    ];
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
