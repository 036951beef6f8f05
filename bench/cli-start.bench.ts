/**
 * The operator CLI's start: `token-broker --help` as an operator runs it, real time, fresh Node process per
 * sample, interleaved with the same Node doing nothing (so the machine's load weighs on all alike). The built
 * package (packaging/build.ts) is packed and installed from its tarball into a bare project, as
 * test/packages.test.ts does; the repository's launcher (bin/token-broker.mjs, compiled by tsx at each call)
 * is the row before it. Plus the client package's import, for a service's cold start.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildCli, buildClient, pack, ROOT } from '../packaging/build.js';

const RUNS = 15;

type Row = Record<string, string | number>;

/** Wall-clock milliseconds of one fresh process, from spawn to exit. */
function timed(command: string, args: string[], cwd: string): number {
  const started = performance.now();
  const result = spawnSync(command, args, {
    cwd,
    env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: '/nonexistent' },
    stdio: 'ignore',
  });
  const elapsed = performance.now() - started;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}`);
  return elapsed;
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
};
const ms = (value: number): number => Number(value.toFixed(1));

function npmInstall(project: string, tarball: string): void {
  mkdirSync(project, { recursive: true });
  writeFileSync(path.join(project, 'package.json'), '{ "private": true, "type": "module" }\n');
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], {
    cwd: project,
    stdio: 'ignore',
  });
}

export async function run(): Promise<{ title: string; rows: Row[]; footnote: string }[]> {
  const work = mkdtempSync(path.join(tmpdir(), 'bench-cli-start-'));
  try {
    const tarballs = path.join(work, 'tarballs');
    const cliTarball = pack(await buildCli(path.join(work, 'build/cli')), tarballs);
    const clientTarball = pack(await buildClient(path.join(work, 'build/client')), tarballs);
    const operator = path.join(work, 'operator');
    const service = path.join(work, 'service');
    npmInstall(operator, cliTarball);
    npmInstall(service, clientTarball);
    const node = process.execPath;
    const subjects = [
      { what: 'node -e "" (an empty Node process: the floor)', command: node, args: ['-e', ''], cwd: work },
      {
        what: 'token-broker --help, the installed package (@token-broker/cli)',
        command: path.join(operator, 'node_modules/.bin/token-broker'),
        args: ['--help'],
        cwd: operator,
      },
      {
        what: 'node bin/token-broker.mjs --help, the repository launcher (tsx compiles cli/ at each call)',
        command: node,
        args: ['bin/token-broker.mjs', '--help'],
        cwd: ROOT,
      },
      {
        what: "import('@token-broker/client'), the installed package (a service's cold start)",
        command: node,
        args: ['--input-type=module', '-e', "await import('@token-broker/client')"],
        cwd: service,
      },
    ];
    const samples = subjects.map(() => [] as number[]);
    for (let i = 0; i < RUNS; i++) {
      subjects.forEach((s, index) => {
        samples[index]?.push(timed(s.command, s.args, s.cwd));
      });
    }
    const rows = subjects.map((s, index) => {
      const values = samples[index] ?? [];
      return {
        what: s.what,
        runs: RUNS,
        'ms p50': ms(percentile(values, 0.5)),
        'ms min': ms(percentile(values, 0)),
        'ms p90': ms(percentile(values, 0.9)),
      };
    });
    return [
      {
        title: `CLI start and client import, real time, fresh Node process (Node ${process.version}), spawn to exit`,
        rows,
        footnote:
          'Each sample spawns a new process and waits for its exit; the subjects are interleaved, one run of each per round. The built CLI loads each command as a chunk of its own, so --help loads neither the AWS SDK nor the client.',
      },
    ];
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
