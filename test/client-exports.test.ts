import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import * as entry from '../client/index.js';
import { buildClient, clientBundleOptions, ROOT } from '../packaging/build.js';

/**
 * The package entry against what the bundle holds: every error class defined in a module the client bundle
 * includes (so one the client can throw) is exported, and the minified bundle keeps their names (callers log
 * `error.name` and switch on it). No engine, no server.
 */

const work = mkdtempSync(path.join(tmpdir(), 'client-exports-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Our modules in the client bundle, as esbuild resolved them (node_modules excluded). */
async function bundledSources(): Promise<string[]> {
  const { metafile } = await build({
    ...clientBundleOptions(path.join(work, 'probe.js')),
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  return Object.keys(metafile?.inputs ?? {}).filter(
    (file) => !file.includes('node_modules') && !file.startsWith('<'),
  );
}

/** Classes defined in those files whose chain of `extends` reaches Error. */
function errorClasses(files: readonly string[]): string[] {
  const parent = new Map<string, string>();
  for (const file of files) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    for (const match of text.matchAll(/\bclass\s+(\w+)\s+extends\s+(\w+)/g))
      parent.set(match[1] ?? '', match[2] ?? '');
  }
  const isError = (name: string, seen = new Set<string>()): boolean => {
    if (name === 'Error') return true;
    const up = parent.get(name);
    if (!up || seen.has(name)) return false;
    seen.add(name);
    return isError(up, seen);
  };
  return [...parent.keys()].filter((name) => isError(name)).sort();
}

describe('@token-broker/client entry: error classes', () => {
  it('exports every error class of the modules the bundle includes, ConfigurationError among them', async () => {
    const classes = errorClasses(await bundledSources());
    expect(classes).toContain('ConfigurationError');
    expect(classes).toContain('BrokerApiError');
    const exported = entry as unknown as Record<string, unknown>;
    const missing = classes.filter((name) => typeof exported[name] !== 'function');
    expect(missing, 'error classes the client bundles but does not export').toEqual([]);
  });

  it('the minified bundle is smaller than the unminified one and keeps every exported class’s name', async () => {
    const dir = await buildClient(path.join(work, 'package'));
    const before = path.join(work, 'before.js');
    await build({ ...clientBundleOptions(before, { minify: false }), logLevel: 'silent' });
    const minified = readFileSync(path.join(dir, 'index.js')).length;
    expect(minified).toBeLessThan(readFileSync(before).length / 2);

    const bundle = (await import(pathToFileURL(path.join(dir, 'index.js')).href)) as Record<string, unknown>;
    const classes = Object.entries(bundle).filter(
      (pair): pair is [string, { name: string; prototype: unknown }] =>
        typeof pair[1] === 'function' && (pair[1] as { prototype?: unknown }).prototype instanceof Error,
    );
    expect(classes.map(([name]) => name).sort()).toEqual(
      Object.entries(entry)
        .filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error)
        .map(([name]) => name)
        .sort(),
    );
    for (const [name, value] of classes) expect(value.name).toBe(name);
    const { ConfigurationError } = bundle as { ConfigurationError: new (message: string) => Error };
    expect(new ConfigurationError('x').name).toBe('ConfigurationError');
  });
});
