import { spawnSync } from 'node:child_process';
import { globSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { transformSync } from 'esbuild';

/**
 * `npm run lint:deps`: dependency-cruiser's rules (.dependency-cruiser.cjs: no import circles, no import up out of a
 * layer) over the project's TypeScript.
 *
 * Why a mirror: dependency-cruiser reads TypeScript only through the `typescript` package's JavaScript API, which
 * TypeScript 7 (this project's compiler) no longer has, so it would silently see no .ts file at all. Each source
 * is therefore transpiled by esbuild into a throw-away mirror of the tree, `.ts` becoming `.js` (the imports
 * already say `.js`), and dependency-cruiser cruises the mirror. Type-only imports are kept as imports first (a
 * circle of types is still a circle): `import type` and `export type {…}`/`export type *` lose their `type`, and
 * with verbatimModuleSyntax esbuild keeps every import statement, even one whose names are all types.
 */

const ROOT = path.resolve(import.meta.dirname, '..');

/** The layers' folders (the layers themselves are in .dependency-cruiser.cjs), and the root's config files. */
const SOURCES = [
  'shared',
  'functions',
  'client',
  'cli',
  'infra',
  'local',
  'sandbox',
  'bench',
  'test',
  'packaging',
  'tools',
  'vitest.config.ts',
];
const IGNORED = ['**/node_modules/**', 'test/.previous-release/**', '**/*.d.ts'];

/** `import type …` and `export type {…} from`/`export type * from` as value imports, for the record of edges. */
export function keepTypeImports(source: string): string {
  return source
    .replace(/^(\s*)import type (?=[{*\w])/gm, '$1import ')
    .replace(/^(\s*)export type (?=[{*])/gm, '$1export ');
}

function mirrorName(file: string): string {
  return file
    .replace(/\.mts$/, '.mjs')
    .replace(/\.cts$/, '.cjs')
    .replace(/\.ts$/, '.js');
}

function buildMirror(mirror: string): Map<string, string> {
  const renamed = new Map<string, string>();
  const patterns = SOURCES.map((source) =>
    source.includes('.') ? source : `${source}/**/*.{ts,mts,cts,js,mjs,cjs,json}`,
  );
  for (const file of globSync(patterns, { cwd: ROOT, exclude: IGNORED })) {
    const target = mirrorName(file);
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    const output = /\.[mc]?ts$/.test(file)
      ? transformSync(keepTypeImports(text), {
          loader: 'ts',
          format: 'esm',
          sourcefile: file,
          tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true } },
        }).code
      : text;
    mkdirSync(path.dirname(path.join(mirror, target)), { recursive: true });
    writeFileSync(path.join(mirror, target), output);
    if (target !== file) renamed.set(target, file);
  }
  // Packages resolve from the mirror as from the tree (dependency-cruiser records them, and follows none).
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(mirror, 'node_modules'), 'dir');
  return renamed;
}

function main(args: string[]): number {
  const mirror = mkdtempSync(path.join(tmpdir(), 'token-broker-dependencies-'));
  try {
    const renamed = buildMirror(mirror);
    const cruiser = path.join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');
    const sources = SOURCES.map(mirrorName);
    const result = spawnSync(
      process.execPath,
      [cruiser, '--config', path.join(ROOT, '.dependency-cruiser.cjs'), ...args, ...sources],
      { cwd: mirror, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 },
    );
    if (result.error) throw result.error;
    // The report names the sources, not their mirrors.
    const original = (text: string) =>
      text.replace(/[\w./-]+\.[mc]?js\b/g, (name) => renamed.get(name) ?? name).replaceAll(`${mirror}/`, '');
    process.stdout.write(original(result.stdout));
    process.stderr.write(original(result.stderr));
    return result.status ?? 1;
  } finally {
    rmSync(mirror, { recursive: true, force: true });
  }
}

process.exitCode = main(process.argv.slice(2));
