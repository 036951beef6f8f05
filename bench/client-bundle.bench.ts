/**
 * What the client package costs a consumer at cold start (`npm run bench -- client-bundle`): the import of its
 * bundle as packaging/build.ts ships it (minified), beside an empty module's and the bundle as it was before
 * (unminified, the CommonJS builds of the bundled packages kept whole). Each sample is a fresh Node process
 * that imports one module and reports how long `import()` took inside it (performance.now() around it: real
 * time, in-process; not the process's start, not a Lambda runtime, no network), with the process's CPU time
 * over the same span. The subjects are imported in turn, round after round (interleaved), so the machine's
 * load weighs on all alike; the load average is printed with them.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { type ImportSubject, measureInterleaved, median } from '../infra/tools/bundle-init.js';
import { buildClient, clientBundleOptions } from '../packaging/build.js';

/** Rounds: each a fresh process per subject. */
const RUNS = 21;

type Row = Record<string, string | number>;

const ms = (value: number): number => Number(value.toFixed(1));
const kib = (bytes: number): number => Number((bytes / 1024).toFixed(1));
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' / ');
/** The value at quantile q of ascending samples. */
const quantile = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const work = mkdtempSync(path.join(tmpdir(), 'bench-client-bundle-'));
  try {
    const shipped = path.join(await buildClient(path.join(work, 'package')), 'index.js');
    const before = path.join(work, 'before', 'index.js');
    await build({ ...clientBundleOptions(before, { minify: false }), logLevel: 'error' });
    const emptyFile = path.join(work, 'empty.mjs');
    writeFileSync(emptyFile, 'export {};\n');
    // No AWS settings, no credentials: the import must not need any (the client reads them on first use).
    const env = { PATH: process.env.PATH ?? '' };
    const subjects: ImportSubject[] = [
      { name: 'empty module', file: emptyFile, env, nodeOptions: [], handler: false },
      { name: 'client bundle, minified (as shipped)', file: shipped, env, nodeOptions: [], handler: false },
      {
        name: 'client bundle, minified, node --enable-source-maps',
        file: shipped,
        env,
        nodeOptions: ['--enable-source-maps'],
        handler: false,
      },
      { name: 'client bundle before (unminified)', file: before, env, nodeOptions: [], handler: false },
    ];
    const loadBefore = load();
    const times = measureInterleaved(subjects, RUNS);
    const loadAfter = load();
    const emptyMs = median(times.get('empty module')?.wallMs ?? []);
    const rows: Row[] = subjects.map((subject) => {
      const { wallMs = [], cpuMs = [] } = times.get(subject.name) ?? {};
      return {
        module: subject.name,
        KiB: kib(readFileSync(subject.file).length),
        runs: RUNS,
        'real ms p50': ms(median(wallMs)),
        'real ms p25-p75': `${ms(quantile(wallMs, 0.25))}-${ms(quantile(wallMs, 0.75))}`,
        'cpu ms p50': ms(median(cpuMs)),
        'real ms beyond empty': ms(median(wallMs) - emptyMs),
      };
    });
    return [
      {
        title: `Client package import: in-process import() in a fresh Node ${process.version} process per sample (real time; CPU of all threads), ${RUNS} interleaved rounds, medians (load average 1/5/15 min: ${loadBefore} before, ${loadAfter} after, ${availableParallelism()} CPUs)`,
        rows,
      },
    ];
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
