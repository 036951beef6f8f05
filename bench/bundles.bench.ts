/**
 * The functions' cold module init as a ratio to an empty module's import, measured in the same run and
 * interleaved (so the machine's load weighs on both alike): each sample is a fresh Node process importing the
 * bundle `cdk synth` builds (real esbuild bundling, offline) with the environment the stack gives the function
 * and its NODE_OPTIONS. Real time, in-process import: no Lambda runtime, no network.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBrokerApp } from '../infra/broker-app.js';
import { measureInit, median } from '../infra/tools/bundle-init.js';

const RUNS = 15;

interface FunctionResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Environment?: { Variables?: Record<string, unknown> } };
}

export async function run(): Promise<{ title: string; rows: Record<string, string | number>[] }[]> {
  const outdir = mkdtempSync(path.join(tmpdir(), 'bench-bundles-'));
  try {
    const { app } = createBrokerApp({
      context: { stage: 'uat', 'aws:cdk:enable-asset-metadata': true },
      outdir,
    });
    const template = app.synth().getStackByName('TokenBroker-uat').template as {
      Resources: Record<string, FunctionResource>;
    };
    const rows: Record<string, string | number>[] = [];
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
      const env = { PATH: process.env.PATH ?? '', ...environment, AWS_REGION: 'eu-west-1' };
      const nodeOptions = (environment.NODE_OPTIONS ?? '').split(' ').filter(Boolean);
      const { bundleMs, emptyMs } = measureInit(bundle, env, nodeOptions, RUNS);
      rows.push({
        function: id,
        'bundle KiB': Number((readFileSync(bundle).length / 1024).toFixed(1)),
        runs: RUNS,
        'import ms p50': Number(median(bundleMs).toFixed(1)),
        'empty module ms p50': Number(median(emptyMs).toFixed(1)),
        'ratio to empty': Number((median(bundleMs) / median(emptyMs)).toFixed(1)),
      });
    }
    return [
      {
        title:
          'Function cold init, real time, in-process import (fresh Node process, stage environment), as a ratio to an empty module in the same run',
        rows,
      },
    ];
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
