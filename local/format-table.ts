/**
 * Plain aligned tables, as `npm run bench` and `npm run soak` print them. In local/, which the bench may import,
 * so that the soak does not import up into bench/ (docs/structure.md).
 */

export type BenchRow = Record<string, string | number>;
export interface BenchTable {
  title: string;
  rows: BenchRow[];
  /** Printed under the table: how to read it, how a contender was set up. */
  footnote?: string;
}

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
  return [table.title, header, rule, ...body, ...(table.footnote ? [`* ${table.footnote}`] : [])].join('\n');
}

const formatNumber = (value: number): string =>
  Number.isInteger(value) ? String(value) : value.toFixed(Math.abs(value) < 10 ? 3 : 1);
