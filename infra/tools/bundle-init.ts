import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Cold module init in real time: a fresh Node process imports the module (and checks for a handler export) and
 * reports how long the import took, in process. Measured beside an empty module's import, interleaved in the
 * same run, so that the ratio says what the bundle costs whatever the machine's load.
 */
const PROBE = `
const started = performance.now();
const module = await import(process.env.PROBE_MODULE);
if (process.env.PROBE_HANDLER && typeof module.handler !== 'function') throw new Error('no handler export');
process.stdout.write(String(performance.now() - started));
`;

export interface InitSample {
  bundleMs: number[];
  emptyMs: number[];
}

export function importMs(
  file: string,
  env: Record<string, string>,
  nodeOptions: string[],
  handler: boolean,
): number {
  const args = [...nodeOptions, '--input-type=module', '-e', PROBE];
  const probeEnv = {
    ...env,
    PROBE_MODULE: pathToFileURL(file).href,
    ...(handler ? { PROBE_HANDLER: '1' } : {}),
  };
  const output = execFileSync(process.execPath, args, {
    env: probeEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  }).toString();
  // The module's own log lines (the cold start logs its configuration) come first; the figure is last.
  return Number(output.slice(output.lastIndexOf('\n') + 1));
}

/** `runs` imports of the bundle and of an empty module, alternating, with the same options and environment. */
export function measureInit(
  bundle: string,
  env: Record<string, string>,
  nodeOptions: string[],
  runs: number,
): InitSample {
  const dir = mkdtempSync(path.join(tmpdir(), 'empty-module-'));
  const empty = path.join(dir, 'index.mjs');
  writeFileSync(empty, 'export const handler = () => undefined;\n');
  try {
    const sample: InitSample = { bundleMs: [], emptyMs: [] };
    for (let i = 0; i < runs; i++) {
      sample.emptyMs.push(importMs(empty, env, nodeOptions, true));
      sample.bundleMs.push(importMs(bundle, env, nodeOptions, true));
    }
    sample.bundleMs.sort((a, b) => a - b);
    sample.emptyMs.sort((a, b) => a - b);
    return sample;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const median = (sorted: readonly number[]): number =>
  sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
