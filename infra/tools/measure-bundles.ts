import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { ZOD_FUNCTIONS_FILE } from '../../shared/aws/bundle/zod-functions-file.js';
import { BUNDLE_BUDGET_KIB, formatInputs, largestInputs } from './bundle-contents.js';
import { measureInit, median } from './bundle-init.js';

/**
 * Measures each function's bundle after a real `cdk synth`: the size of the bundle and its source map, and
 * the cold module-init time, i.e. a fresh Node process (with the functions' NODE_OPTIONS) importing the
 * bundle and finding its handler, with the environment the stack gives the function (resource names
 * replaced by placeholders). Nothing reaches AWS: module init only parses configuration and builds clients.
 * Also: the init as a ratio to an empty module's import in the same run (interleaved), and the table of what
 * each bundle is made of (largest inputs, from its source map).
 *
 *   npx cdk synth -c stage=uat --quiet && npx tsx infra/tools/measure-bundles.ts cdk.out TokenBroker-uat 15
 */
const [outdir = 'cdk.out', stack = 'TokenBroker-uat', runsArg = '15'] = process.argv.slice(2);
const runs = Number(runsArg);

interface LambdaResource {
  Type: string;
  Metadata?: Record<string, unknown>;
  Properties: { Description?: string; Environment?: { Variables?: Record<string, unknown> } };
}
const template = JSON.parse(readFileSync(path.join(outdir, `${stack}.template.json`), 'utf8')) as {
  Resources: Record<string, LambdaResource>;
};

const INIT_PROBE = `
const started = performance.now();
const module = await import(process.env.PROBE_BUNDLE);
if (typeof module.handler !== 'function') throw new Error('no handler export');
process.stdout.write(String(performance.now() - started));
`;

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;

for (const [id, resource] of Object.entries(template.Resources)) {
  if (resource.Type !== 'AWS::Lambda::Function') continue;
  const asset = resource.Metadata?.['aws:asset:path'];
  if (typeof asset !== 'string') continue;
  const bundle = path.resolve(outdir, asset, 'index.js');
  const code = readFileSync(bundle);
  const mapBytes = statSync(`${bundle}.map`).size;
  const zodBytes = statSync(path.join(path.dirname(bundle), ZOD_FUNCTIONS_FILE)).size;
  const environment: Record<string, string> = {};
  for (const [name, value] of Object.entries(resource.Properties.Environment?.Variables ?? {})) {
    environment[name] = typeof value === 'string' ? value : `placeholder-${name.toLowerCase()}`;
  }
  // The function's NODE_OPTIONS are given on the command line, per measurement: left in the environment they
  // would apply to every run, the one meant to be without --enable-source-maps too.
  const { NODE_OPTIONS: functionNodeOptions = '', ...otherVariables } = environment;
  const env = {
    PATH: process.env.PATH ?? '',
    ...otherVariables,
    AWS_REGION: 'eu-west-1',
    AWS_LAMBDA_FUNCTION_NAME: id,
    LAMBDA_TASK_ROOT: path.dirname(bundle),
    PROBE_BUNDLE: pathToFileURL(bundle).href,
  };
  const nodeOptions = functionNodeOptions.split(' ').filter(Boolean);
  const measure = (options: string[]): number[] =>
    Array.from({ length: runs }, () => {
      const args = [...options, '--input-type=module', '-e', INIT_PROBE];
      const output = execFileSync(process.execPath, args, {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      }).toString();
      // The module's own log lines (the cold start logs its configuration) come first; the figure is last.
      return Number(output.slice(output.lastIndexOf('\n') + 1));
    }).sort((a, b) => a - b);
  let samples: number[];
  let otherSourceMaps: number[];
  const sourceMapsFlag = '--enable-source-maps';
  const hasSourceMaps = nodeOptions.includes(sourceMapsFlag);
  let init: ReturnType<typeof measureInit>;
  try {
    init = measureInit(bundle, env, nodeOptions, runs);
    samples = measure(nodeOptions);
    // The price of --enable-source-maps at init, for comparison: the import the other way round.
    otherSourceMaps = measure(
      hasSourceMaps
        ? nodeOptions.filter((option) => option !== sourceMapsFlag)
        : [...nodeOptions, sourceMapsFlag],
    );
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? error);
    const firstLines = stderr.trim().split('\n').slice(0, 6);
    console.log(JSON.stringify({ function: id, bundle: kib(code.length), initFailed: firstLines }));
    continue;
  }
  console.log(
    JSON.stringify({
      function: id,
      bundle: kib(code.length),
      bundleGzip: kib(gzipSync(code).length),
      sourceMap: kib(mapBytes),
      nodeOptions: nodeOptions.join(' '),
      runs,
      initMsMedian: Number(percentile(samples, 0.5).toFixed(1)),
      initMsP90: Number(percentile(samples, 0.9).toFixed(1)),
      initMsMin: Number((samples[0] ?? Number.NaN).toFixed(1)),
      [hasSourceMaps ? 'initMsMedianWithoutSourceMaps' : 'initMsMedianWithEnableSourceMaps']: Number(
        percentile(otherSourceMaps, 0.5).toFixed(1),
      ),
      emptyModuleImportMsMedian: Number(median(init.emptyMs).toFixed(1)),
      initRatioToEmptyModule: Number((median(init.bundleMs) / median(init.emptyMs)).toFixed(1)),
      // zod, loaded on first use from beside the bundle (shared/aws/bundle/zod-on-first-use.ts), counts too.
      zodOnFirstUse: kib(zodBytes),
      budget: `${BUNDLE_BUDGET_KIB} KiB: ${code.length + zodBytes <= BUNDLE_BUDGET_KIB * 1024 ? 'within' : 'OVER'}`,
    }),
  );
  const map = JSON.parse(readFileSync(`${bundle}.map`, 'utf8')) as { sources: string[]; mappings: string };
  const inputs = largestInputs(code.toString(), map, path.dirname(bundle), process.cwd());
  console.log(
    [`${id}: largest inputs of ${kib(code.length)}`, ...formatInputs(inputs, code.length, 12)].join('\n'),
  );
}
