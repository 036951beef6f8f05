/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or those whose name contains an argument, e.g.
 * `npm run bench -- ledger`) and prints each module's tables. A module exports
 * `run(): Promise<{ title: string; rows: Record<string, string | number>[] }[]>`.
 */
import { readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type BenchTable, formatTable } from '../local/format-table.js';

const here = dirname(fileURLToPath(import.meta.url));

async function main(): Promise<void> {
  const filters = process.argv.slice(2);
  const files = (await readdir(here))
    .filter((name) => name.endsWith('.bench.ts'))
    .filter((name) => filters.length === 0 || filters.some((filter) => name.includes(filter)))
    .sort();
  if (files.length === 0) throw new Error(`no bench/*.bench.ts matches ${filters.join(', ') || 'anything'}`);
  let failed = 0;
  for (const file of files) {
    const started = performance.now();
    console.log(`\n=== ${file}`);
    try {
      const module = (await import(pathToFileURL(join(here, file)).href)) as {
        run?: () => Promise<BenchTable[]>;
      };
      if (typeof module.run !== 'function') throw new Error('exports no run()');
      for (const table of await module.run()) console.log(`\n${formatTable(table)}`);
      console.log(`\n(${file}: ${((performance.now() - started) / 1000).toFixed(1)} s)`);
    } catch (error) {
      failed++;
      console.error(`${file} failed:`, error);
    }
  }
  if (failed > 0) process.exitCode = 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
