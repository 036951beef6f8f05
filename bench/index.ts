/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or those whose name contains an argument, e.g.
 * `npm run bench -- ledger`) and prints each module's tables. A module exports
 * `run(): Promise<{ title: string; rows: Record<string, string | number>[] }[]>`.
 */
import { readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type BenchRow = Record<string, string | number>;
export interface BenchTable {
  title: string;
  rows: BenchRow[];
}

const here = dirname(fileURLToPath(import.meta.url));

/** Columns padded to their widest cell; numbers right-aligned. */
export function formatTable(table: BenchTable): string {
  const columns = [...new Set(table.rows.flatMap((row) => Object.keys(row)))];
  const cell = (value: string | number | undefined) =>
    value === undefined ? '' : typeof value === 'number' ? formatNumber(value) : value;
  const widths = columns.map((column) =>
    Math.max(column.length, ...table.rows.map((row) => cell(row[column]).length)),
  );
  const line = (cells: string[], numeric: boolean[]) =>
    cells
      .map((text, i) => (numeric[i] ? text.padStart(widths[i] ?? 0) : text.padEnd(widths[i] ?? 0)))
      .join('  ');
  const header = line(
    columns,
    columns.map(() => false),
  );
  const rule = widths.map((width) => '-'.repeat(width)).join('  ');
  const body = table.rows.map((row) =>
    line(
      columns.map((column) => cell(row[column])),
      columns.map((column) => typeof row[column] === 'number'),
    ),
  );
  return [table.title, header, rule, ...body].join('\n');
}

const formatNumber = (value: number): string =>
  Number.isInteger(value) ? String(value) : value.toFixed(Math.abs(value) < 10 ? 3 : 1);

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
