/**
 * The functions' cold module init beside the DynamoDB client's alone (the yardstick) and an empty module's: each
 * sample a fresh Node process importing the bundle `cdk synth` builds (real esbuild bundling, offline) with the
 * environment the stack gives the function and its NODE_OPTIONS. The empty module, the yardstick and each
 * function are imported in turn, round after round (interleaved), so the machine's load weighs on all alike and
 * the ratios of the medians stay fair on a shared machine; the load average is printed with them. Real time and
 * CPU time (all of the process's threads: V8 compiles and collects garbage beside the main thread), in-process
 * import: no Lambda runtime, no network.
 *
 * Then what remains of each import, part by part (infra/tools/bundle-init.ts, measureInitBreakdown), the
 * yardstick's parts beside, and what each bundle carries beyond the yardstick's packages.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { createBrokerApp } from '../infra/broker-app.js';
import { FUNCTION_BUNDLE_OPTIONS } from '../infra/constructs/broker-function.js';
import { largestInputs } from '../infra/tools/bundle-contents.js';
import {
  type ImportSubject,
  measureInitBreakdown,
  measureInterleaved,
  median,
} from '../infra/tools/bundle-init.js';
import { ZOD_FUNCTIONS_FILE } from '../shared/aws/bundle/zod-functions-file.js';

/** Rounds: each a fresh process per subject. 21 at least, for medians that hold on a loaded machine. */
const RUNS = 21;

interface FunctionResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Environment?: { Variables?: Record<string, unknown> } };
}

type Row = Record<string, string | number>;

const ms = (value: number): number => Number(value.toFixed(1));
const ratio = (value: number, unit: number): number => Number((value / unit).toFixed(2));
const kib = (bytes: number): number => Number((bytes / 1024).toFixed(1));
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' / ');

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
    const functions: ImportSubject[] = [];
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
      // NODE_OPTIONS are given on the command line. LAMBDA_TASK_ROOT: where Lambda runs the asset from, and
      // finds its configuration document.
      const { NODE_OPTIONS: nodeOptions = '', ...variables } = environment;
      functions.push({
        name: id,
        file: bundle,
        env: {
          PATH: process.env.PATH ?? '',
          ...variables,
          AWS_REGION: 'eu-west-1',
          LAMBDA_TASK_ROOT: path.dirname(bundle),
        },
        nodeOptions: nodeOptions.split(' ').filter(Boolean),
      });
    }
    // The yardstick: the DynamoDB client alone, the SDK unmodified (none of the functions' aliases), bundled
    // with the functions' other esbuild options (infra/constructs/broker-function.ts).
    const yardstickFile = path.join(outdir, 'yardstick', 'index.js');
    buildSync({
      ...FUNCTION_BUNDLE_OPTIONS,
      mainFields: [...FUNCTION_BUNDLE_OPTIONS.mainFields],
      entryPoints: [fileURLToPath(new URL('./yardstick/dynamodb-client-alone.ts', import.meta.url))],
      outfile: yardstickFile,
      sourcemap: true,
      sourcesContent: false,
      logLevel: 'error',
    });
    const emptyDir = mkdtempSync(path.join(outdir, 'empty-module-'));
    const empty = path.join(emptyDir, 'index.mjs');
    writeFileSync(empty, 'export const handler = () => undefined;\n');
    const plainEnv = { PATH: process.env.PATH ?? '', AWS_REGION: 'eu-west-1' };
    const yardstick: ImportSubject = {
      name: 'yardstick: @aws-sdk/client-dynamodb alone (one client, one GetItem path)',
      file: yardstickFile,
      env: plainEnv,
      nodeOptions: [],
    };
    const subjects: ImportSubject[] = [
      { name: 'empty module', file: empty, env: plainEnv, nodeOptions: [] },
      yardstick,
      ...functions,
    ];
    const loadBefore = load();
    const times = measureInterleaved(subjects, RUNS);
    const loadAfter = load();
    const p50 = (name: string) => {
      const entry = times.get(name);
      return { wall: median(entry?.wallMs ?? []), cpu: median(entry?.cpuMs ?? []) };
    };
    const unit = p50(yardstick.name);
    const emptyUnit = p50('empty module');
    const imports: Row[] = subjects.map((subject) => {
      const { wall, cpu } = p50(subject.name);
      return {
        module: subject.name,
        KiB: kib(readFileSync(subject.file).length),
        // What a first request loads beside the bundle (shared/aws/bundle/zod-on-first-use.ts): not imported.
        'KiB on first use': functions.includes(subject)
          ? kib(readFileSync(path.join(path.dirname(subject.file), ZOD_FUNCTIONS_FILE)).length)
          : '-',
        runs: RUNS,
        'wall ms p50': ms(wall),
        'cpu ms p50': ms(cpu),
        'wall x yardstick': ratio(wall, unit.wall),
        'cpu x yardstick': ratio(cpu, unit.cpu),
        'wall x empty': ratio(wall, emptyUnit.wall),
      };
    });

    // What remains: each import split into parts, the yardstick's beside; round after round, interleaved too.
    const partsOf = (parts: ReturnType<typeof measureInitBreakdown>) => {
      const sourceMapsMs = parts.importMs - parts.importWithoutSourceMapsMs;
      return {
        compile: parts.compileMs,
        'built-ins': parts.builtinsMs,
        evaluation: parts.importMs - sourceMapsMs - parts.compileMs - parts.builtinsMs,
        ...(sourceMapsMs !== 0 ? { 'source maps': sourceMapsMs } : {}),
        import: parts.importMs,
      } as Record<string, number>;
    };
    const samples = new Map<string, Map<string, number[]>>();
    const builtinsOf = new Map<string, string[]>();
    for (let round = 0; round < RUNS; round++) {
      for (const subject of [yardstick, ...functions]) {
        const parts = measureInitBreakdown(subject.file, subject.env, subject.nodeOptions, 1);
        builtinsOf.set(subject.name, parts.builtins);
        const bySubject = samples.get(subject.name) ?? new Map<string, number[]>();
        samples.set(subject.name, bySubject);
        for (const [part, partMs] of Object.entries(partsOf(parts))) {
          bySubject.set(part, [...(bySubject.get(part) ?? []), partMs]);
        }
      }
    }
    const partMedian = (name: string, part: string): number | undefined => {
      const values = samples.get(name)?.get(part);
      return values ? median([...values].sort((a, b) => a - b)) : undefined;
    };
    const WHAT: Record<string, string> = {
      compile:
        'V8 parses the whole bundle and compiles its top level (functions pre-parsed), before anything runs',
      'built-ins': 'Node built-ins the import loads, required in a process that has loaded nothing else',
      evaluation:
        "the bundle's module-scope code (SDK clients, Powertools, configuration), compiling each function the first time it runs: the rest of the import",
      'source maps': '--enable-source-maps: import with it less import without',
      import: 'the whole import (each part a median of its own runs; evaluation is what the others leave)',
    };
    const remains: Row[] = [];
    for (const subject of functions) {
      for (const part of samples.get(subject.name)?.keys() ?? []) {
        const partMs = partMedian(subject.name, part) ?? Number.NaN;
        const base = partMedian(yardstick.name, part);
        remains.push({
          function: subject.name,
          part,
          'ms p50': ms(partMs),
          'yardstick ms p50': base === undefined ? '-' : ms(base),
          'x yardstick part': base ? ratio(partMs, base) : '-',
          what:
            part === 'built-ins'
              ? `${WHAT[part]}: ${builtinsOf.get(subject.name)?.join(' ') || 'none'}`
              : (WHAT[part] ?? ''),
        });
      }
    }

    // What each bundle carries beyond the yardstick: bytes per package, less the yardstick's of the same package.
    const contents = (file: string) =>
      largestInputs(
        readFileSync(file, 'utf8'),
        JSON.parse(readFileSync(`${file}.map`, 'utf8')),
        path.dirname(file),
        process.cwd(),
      );
    const yardstickBytes = new Map(contents(yardstickFile).map((input) => [input.name, input.bytes]));
    const beyond: Row[] = [];
    for (const subject of functions) {
      const extra = contents(subject.file)
        .map((input) => ({ name: input.name, bytes: input.bytes - (yardstickBytes.get(input.name) ?? 0) }))
        .sort((a, b) => b.bytes - a.bytes);
      for (const input of extra.slice(0, 10)) {
        beyond.push({
          function: subject.name,
          package: input.name,
          'KiB beyond the yardstick': kib(input.bytes),
        });
      }
    }
    return [
      {
        title: `Cold import, interleaved: empty module, yardstick and each function in turn, ${RUNS} rounds of fresh Node processes, medians (load average 1/5/15 min: ${loadBefore} before, ${loadAfter} after, ${availableParallelism()} CPUs)`,
        rows: imports,
      },
      {
        title:
          "What remains of each function's import, part by part (each part in its own fresh Node processes, medians), beside the yardstick's same part",
        rows: remains,
      },
      {
        title:
          "What each bundle carries beyond the yardstick (KiB per package, less the yardstick's own; minified)",
        rows: beyond,
      },
    ];
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
