import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Cold module init in real time: a fresh Node process imports the module (and checks for a handler export) and
 * reports how long the import took, in process. Measured beside an empty module's import, interleaved in the
 * same run, so that the ratio says what the bundle costs whatever the machine's load.
 *
 * What "an empty module's import" measures: the import itself is under 1 ms; most of the 4-6 ms is Node creating
 * `process.stdout`, which `process.stdout.write(...)` does before the argument reads the clock. The bundles pay
 * that too, once, during their import (Powertools' Logger writes through a Console on process.stdout), so each
 * side of the ratio pays it once: the unit is an empty import plus the stdout stream.
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

/**
 * Runs one Node process and returns the last line it printed: the probe's figure. Lines before it are the
 * module's own (a bundle's cold start logs its configuration).
 */
function node(args: string[], env: Record<string, string>): string {
  const output = execFileSync(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  return output.slice(output.lastIndexOf('\n') + 1);
}

export function importMs(
  file: string,
  env: Record<string, string>,
  nodeOptions: string[],
  handler: boolean,
): number {
  return Number(
    node([...nodeOptions, '--input-type=module', '-e', PROBE], {
      ...env,
      PROBE_MODULE: pathToFileURL(file).href,
      ...(handler ? { PROBE_HANDLER: '1' } : {}),
    }),
  );
}

const sorted = (values: number[]): number[] => [...values].sort((a, b) => a - b);

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

/** Like PROBE, and the CPU time the import took beside its real time (user + system, all of the process's threads). */
const CPU_PROBE = `
const started = performance.now();
const cpu = process.cpuUsage();
const module = await import(process.env.PROBE_MODULE);
const used = process.cpuUsage(cpu);
const elapsed = performance.now() - started;
if (process.env.PROBE_HANDLER && typeof module.handler !== 'function') throw new Error('no handler export');
process.stdout.write(elapsed + ' ' + (used.user + used.system) / 1000);
`;

/** One module to import: its file and the environment and Node options it is imported with. */
export interface ImportSubject {
  name: string;
  file: string;
  env: Record<string, string>;
  nodeOptions: string[];
  /** Whether the import must export a `handler` (default true: a function's bundle); false for a library. */
  handler?: boolean;
}

/** Each subject's imports, real and CPU time in ms, sorted ascending. */
export interface ImportTimes {
  wallMs: number[];
  cpuMs: number[];
}

/**
 * `runs` rounds; in each, every subject imported once in a fresh Node process, one after the other. The
 * subjects of a round share the machine's load of that moment, so ratios of their medians stay fair on a
 * loaded machine.
 */
export function measureInterleaved(
  subjects: readonly ImportSubject[],
  runs: number,
): Map<string, ImportTimes> {
  const times = new Map(subjects.map((subject) => [subject.name, { wallMs: [], cpuMs: [] } as ImportTimes]));
  for (let round = 0; round < runs; round++) {
    for (const subject of subjects) {
      const [wall, cpu] = node([...subject.nodeOptions, '--input-type=module', '-e', CPU_PROBE], {
        ...subject.env,
        PROBE_MODULE: pathToFileURL(subject.file).href,
        ...(subject.handler === false ? {} : { PROBE_HANDLER: '1' }),
      })
        .split(' ')
        .map(Number);
      const entry = times.get(subject.name);
      entry?.wallMs.push(wall ?? Number.NaN);
      entry?.cpuMs.push(cpu ?? Number.NaN);
    }
  }
  for (const entry of times.values()) {
    entry.wallMs.sort((a, b) => a - b);
    entry.cpuMs.sort((a, b) => a - b);
  }
  return times;
}

export const median = (sorted: readonly number[]): number =>
  sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;

/** The public Node built-ins a module's import loads (not loaded already by Node itself), in load order. */
const BUILTINS_PROBE = `
const { builtinModules } = await import('node:module');
const before = new Set(process.moduleLoadList);
await import(process.env.PROBE_MODULE);
const loaded = process.moduleLoadList.filter((entry) => !before.has(entry) && entry.startsWith('NativeModule '));
const builtins = new Set(builtinModules);
process.stdout.write(JSON.stringify(loaded.map((entry) => entry.slice('NativeModule '.length)).filter((id) => builtins.has(id) && !id.startsWith('_'))));
`;

/** Times `require` of the built-ins in `PROBE_BUILTINS`, in order, in a process that has loaded nothing else. */
const REQUIRE_PROBE = `
const { createRequire } = await import('node:module');
const require = createRequire(import.meta.url);
const ids = JSON.parse(process.env.PROBE_BUILTINS);
const started = performance.now();
for (const id of ids) require(id);
const elapsed = performance.now() - started;
process.stdout.write(String(elapsed));
`;

/** Compiles the bundle as Node's CommonJS loader does, without running it. */
const COMPILE_PROBE = `
const { readFileSync } = await import('node:fs');
const { compileFunction } = await import('node:vm');
const source = readFileSync(process.env.PROBE_FILE, 'utf8');
const started = performance.now();
compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname'], { filename: process.env.PROBE_FILE });
const elapsed = performance.now() - started;
process.stdout.write(String(elapsed));
`;

/** Where a CommonJS bundle's import time goes, each part measured in fresh processes (medians of `runs`). */
export interface InitBreakdown {
  /** The import, with the function's NODE_OPTIONS. */
  importMs: number;
  /** The import without --enable-source-maps (the same as `importMs` when the function runs without it). */
  importWithoutSourceMapsMs: number;
  /** V8 parsing and compiling the bundle (top level compiled, functions pre-parsed), nothing run. */
  compileMs: number;
  /** Requiring the Node built-ins the import loads, in a process that has loaded nothing else. */
  builtinsMs: number;
  builtins: string[];
}

/**
 * The bundle's import split into what can be measured apart: V8's compile of the source, the Node built-ins it
 * loads, the source map (--enable-source-maps: read, parsed and indexed at load), and the rest: evaluating the
 * bundle's own code (its module-scope work, and compiling each function the first time it runs).
 */
export function measureInitBreakdown(
  bundle: string,
  env: Record<string, string>,
  nodeOptions: string[],
  runs: number,
): InitBreakdown {
  const withoutSourceMaps = nodeOptions.filter((option) => option !== '--enable-source-maps');
  // NODE_OPTIONS in the environment would apply to every probe: the options are given on the command line.
  const { NODE_OPTIONS: _ignored, ...baseEnv } = env;
  const builtins = JSON.parse(
    node([...nodeOptions, '--input-type=module', '-e', BUILTINS_PROBE], {
      ...baseEnv,
      PROBE_MODULE: pathToFileURL(bundle).href,
    }),
  ) as string[];
  const parts = { withMaps: [] as number[], withoutMaps: [] as number[], compile: [] as number[] };
  const builtinRuns: number[] = [];
  for (let i = 0; i < runs; i++) {
    parts.withMaps.push(importMs(bundle, baseEnv, nodeOptions, true));
    if (withoutSourceMaps.length < nodeOptions.length)
      parts.withoutMaps.push(importMs(bundle, baseEnv, withoutSourceMaps, true));
    parts.compile.push(
      Number(node(['--input-type=module', '-e', COMPILE_PROBE], { ...baseEnv, PROBE_FILE: bundle })),
    );
    builtinRuns.push(
      Number(
        node(['--input-type=module', '-e', REQUIRE_PROBE], {
          ...baseEnv,
          PROBE_BUILTINS: JSON.stringify(builtins),
        }),
      ),
    );
  }
  return {
    importMs: median(sorted(parts.withMaps)),
    importWithoutSourceMapsMs: parts.withoutMaps.length
      ? median(sorted(parts.withoutMaps))
      : median(sorted(parts.withMaps)),
    compileMs: median(sorted(parts.compile)),
    builtinsMs: median(sorted(builtinRuns)),
    builtins,
  };
}
