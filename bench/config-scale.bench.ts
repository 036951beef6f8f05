/**
 * A company-sized stage (infra/tools/generate-stage.ts) against a small one: what 500 consumers and 100
 * credential sets cost the vend function at cold start, and what they cost each request's authorization.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBrokerApp } from '../infra/broker-app.js';
import { parseStageConfig } from '../infra/stage-config.js';
import { importMs, median } from '../infra/tools/bundle-init.js';
import { generateStage } from '../infra/tools/generate-stage.js';
import type { BenchTable } from '../local/format-table.js';
import { BROKER_CONFIG_FILE } from '../shared/config/broker-config.js';
import { AccessPolicy } from '../shared/vend/access-policy.js';

const RUNS = 21;
const CHECKS = 200_000;
const SIZES = [
  { name: 'small', consumers: 4, sets: 2 },
  { name: 'company', consumers: 500, sets: 100 },
] as const;

interface FunctionResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Description?: string; Environment?: { Variables?: Record<string, unknown> } };
}

/** The vend bundle `cdk synth` builds for the stage, with the environment the stack gives it. */
function vendBundle(
  outdir: string,
  stackName: string,
  template: { Resources: Record<string, FunctionResource> },
) {
  const [, vend] =
    Object.entries(template.Resources).find(
      ([, r]) => r.Type === 'AWS::Lambda::Function' && r.Properties.Description?.includes('vends tokens'),
    ) ?? [];
  if (!vend) throw new Error(`${stackName}: no vend function`);
  const dir = path.join(outdir, String(vend.Metadata?.['aws:asset:path']));
  const environment = Object.fromEntries(
    Object.entries(vend.Properties.Environment?.Variables ?? {}).map(([name, value]) => [
      name,
      typeof value === 'string' ? value : `placeholder-${name.toLowerCase()}`,
    ]),
  );
  return {
    file: path.join(dir, 'index.js'),
    documentBytes: readFileSync(path.join(dir, BROKER_CONFIG_FILE)).length,
    env: { PATH: process.env.PATH ?? '', ...environment, AWS_REGION: 'eu-west-1', LAMBDA_TASK_ROOT: dir },
    nodeOptions: (environment.NODE_OPTIONS ?? '').split(' ').filter(Boolean),
  };
}

function coldInit(): BenchTable {
  const outdir = mkdtempSync(path.join(tmpdir(), 'bench-config-'));
  try {
    const stages = SIZES.map((size) => generateStage({ ...size, accounts: 10 }));
    const { app } = createBrokerApp({ stages, context: { 'aws:cdk:enable-asset-metadata': true }, outdir });
    const assembly = app.synth();
    const bundles = SIZES.map((size) => {
      const name = `TokenBroker-${size.name}`;
      return { size, ...vendBundle(outdir, name, assembly.getStackByName(name).template) };
    });
    // Interleaved, so that the machine's load weighs on both stages alike.
    const samples = bundles.map(() => [] as number[]);
    for (let run = 0; run < RUNS; run++) {
      bundles.forEach((bundle, i) => {
        samples[i]?.push(importMs(bundle.file, bundle.env, bundle.nodeOptions, true));
      });
    }
    const p50 = samples.map((sample) => median(sample.sort((a, b) => a - b)));
    const base = p50[0] ?? Number.NaN;
    return {
      title:
        'Vend cold init by stage size, real time, in-process import (fresh Node process: the bundle cdk synth builds, its configuration document and stage environment; no Lambda runtime, no network)',
      rows: bundles.map((bundle, i) => ({
        stage: `${bundle.size.consumers} consumers, ${bundle.size.sets} sets`,
        'document bytes': bundle.documentBytes,
        runs: RUNS,
        'import ms p50': Number((p50[i] ?? Number.NaN).toFixed(1)),
        'vs small stage': `${((100 * ((p50[i] ?? 0) - base)) / base).toFixed(1)} %`,
      })),
      footnote:
        'Same bundle code for both stages (the configuration is a file beside it); the difference is reading the document (hashed against BROKER_CONFIG_REVISION; validated at synth, so used as written) and building the access rules. Goal: within 10 %.',
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

function authorization(): BenchTable {
  const rows = [
    { consumers: 4, sets: 2 },
    { consumers: 500, sets: 100 },
    { consumers: 5000, sets: 100 },
  ].map(({ consumers, sets }) => {
    // Consumers as generated (5000 exceed a stage's document bound: there for the curve only).
    const stage = generateStage({ consumers, sets });
    const setConfigs = parseStageConfig(generateStage({ consumers: 4, sets })).credentialSets.map(
      ({ secretName, ...set }) => ({ ...set, secretId: secretName }),
    );
    let started = performance.now();
    const policy = new AccessPolicy(setConfigs, stage.consumers, stage.operators ?? []);
    const buildMs = performance.now() - started;
    // Callers as the Function URL presents them: assumed-role sessions of the consumers' roles.
    const callers = stage.consumers.map((consumer) => {
      const [, , , , account, resource = ''] = consumer.principalArn.split(':');
      return {
        arn: `arn:aws:sts::${account}:assumed-role/${resource.split('/').at(-1)}/session-1`,
        account,
        setId: consumer.credentialSets[0] ?? '',
      };
    });
    let sink = 0;
    started = performance.now();
    for (let i = 0; i < CHECKS; i++) {
      const caller = callers[(i * 7919) % callers.length];
      if (!caller) continue;
      const identified = policy.identify(caller.arn, caller.account);
      sink += policy.authorize(identified, caller.setId).id.length;
    }
    const nsPerCheck = ((performance.now() - started) * 1e6) / CHECKS;
    if (sink === 0) throw new Error('no check ran');
    return {
      stage: `${consumers} consumers, ${sets} sets`,
      checks: CHECKS,
      'build ms (once, cold start)': Number(buildMs.toFixed(2)),
      'ns per check': Math.round(nsPerCheck),
    };
  });
  return {
    title:
      'Authorization per request, real time, in-process (AccessPolicy.identify + authorize on a session ARN; no HTTP, no SigV4)',
    rows,
    footnote:
      'identify() parses the caller ARN to its principal key and finds its rule in a Map; authorize() looks the set up in a Set: the cost per request does not grow with the consumers.',
  };
}

export async function run(): Promise<BenchTable[]> {
  return [authorization(), coldInit()];
}
