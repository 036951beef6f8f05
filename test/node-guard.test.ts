import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * From source, the project runs on the Lambda runtime's Node major only (.nvmrc): `npm start`, `npm test` and
 * bin/token-broker.mjs first run tools/require-node.mjs, which on another major stops with one line that says what
 * to do. Run here on the machine's own older Node, as after `npm ci --ignore-scripts`, where the `node`
 * devDependency's Node 24 is missing and the first `node` on PATH is the machine's.
 */
interface Run {
  exit: number;
  stdout: string;
  stderr: string;
}

function runFile(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ exit: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
    });
  });
}

const NEEDED = readFileSync('.nvmrc', 'utf8').trim();
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
  scripts: Record<string, string>;
};

/** The one line, for a Node of version `running` where major `needed` is. */
const needsLine = (running: string, needed = NEEDED) =>
  `token-broker needs Node ${needed} (the Lambda runtime's major); this is Node ${running}. Run "npm ci" (it installs Node ${needed} as a devDependency; "npm ci --ignore-scripts" skips it), or "nvm use" (.nvmrc).\n`;

/** The machine's own Node (PATH without node_modules/.bin), when it is another major than the project's. */
function machineNode(): { path: string; version: string } | undefined {
  try {
    const found = execFileSync('/usr/bin/env', ['-i', 'PATH=/usr/local/bin:/usr/bin:/bin', 'which', 'node'], {
      encoding: 'utf8',
    }).trim();
    const version = execFileSync(found, ['--version'], { encoding: 'utf8' }).trim().slice(1);
    return version.split('.')[0] === NEEDED ? undefined : { path: found, version };
  } catch {
    return undefined;
  }
}
const OTHER = machineNode();
if (!OTHER)
  console.log(
    `no Node other than ${NEEDED} on PATH=/usr/local/bin:/usr/bin:/bin: the entries ran on ${NEEDED} only`,
  );

describe('the Node the project needs from source', () => {
  it('is one major, said alike by .nvmrc, package.json’s engines and the `node` devDependency', () => {
    expect(NEEDED).toMatch(/^\d+$/);
    expect(manifest.engines.node).toBe(`>=${NEEDED} <${Number(NEEDED) + 1}`);
    expect(manifest.devDependencies.node?.split('.')[0]).toBe(NEEDED);
  });

  it('the guard passes silently on the project’s Node, and stops another major with the one line (exit 1)', async () => {
    const here = await runFile(process.execPath, ['tools/require-node.mjs'], {});
    expect(here).toEqual({ exit: 0, stdout: '', stderr: '' });
    // The same guard where .nvmrc names another major: this Node is then the wrong one.
    const dir = mkdtempSync(path.join(tmpdir(), 'node-guard-'));
    mkdirSync(path.join(dir, 'tools'));
    copyFileSync('tools/require-node.mjs', path.join(dir, 'tools/require-node.mjs'));
    writeFileSync(path.join(dir, '.nvmrc'), '99\n');
    const other = await runFile(process.execPath, [path.join(dir, 'tools/require-node.mjs')], {});
    expect(other).toEqual({
      exit: 1,
      stdout: '',
      stderr: needsLine(process.versions.node, '99'),
    });
  });

  const others = OTHER ? [OTHER] : [];
  it.each(others)(
    'on Node $version, npm start, npm test and the CLI from source stop at once with the one line (exit 1)',
    async (other) => {
      // As npm runs a script (`sh -c`), with the machine's Node first on PATH and no node_modules/.bin.
      const env = { PATH: `${path.dirname(other.path)}:/usr/bin:/bin`, HOME: '/nonexistent' };
      const runs = {
        'npm start': await runFile('/bin/sh', ['-c', manifest.scripts.start ?? ''], env),
        'npm test': await runFile('/bin/sh', ['-c', manifest.scripts.test ?? ''], env),
        'bin/token-broker.mjs --help': await runFile(other.path, ['bin/token-broker.mjs', '--help'], env),
      };
      for (const [entry, run] of Object.entries(runs)) {
        expect(run, entry).toEqual({ exit: 1, stdout: '', stderr: needsLine(other.version) });
      }
    },
  );
});
