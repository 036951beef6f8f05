/** Small text helpers for what the CLI prints. */

/** "3h 59m", "4m 05s", "12s"; negative durations are "-" prefixed. */
export function formatDuration(seconds: number): string {
  const sign = seconds < 0 ? '-' : '';
  let rest = Math.floor(Math.abs(seconds));
  const days = Math.floor(rest / 86_400);
  rest -= days * 86_400;
  const hours = Math.floor(rest / 3600);
  rest -= hours * 3600;
  const minutes = Math.floor(rest / 60);
  const secs = rest - minutes * 60;
  if (days > 0) return `${sign}${days}d ${hours}h`;
  if (hours > 0) return `${sign}${hours}h ${String(minutes).padStart(2, '0')}m`;
  if (minutes > 0) return `${sign}${minutes}m ${String(secs).padStart(2, '0')}s`;
  return `${sign}${secs}s`;
}

/** "5m 02s ago" for a past instant (epoch ms), "in 5m 02s" for a future one. */
export function formatRelative(atMs: number, nowMs: number): string {
  const seconds = (nowMs - atMs) / 1000;
  return seconds >= 0 ? `${formatDuration(seconds)} ago` : `in ${formatDuration(-seconds)}`;
}

/** ISO 8601 UTC without milliseconds: what an operator compares with log timestamps. */
export const isoSeconds = (atMs: number): string => new Date(atMs).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** "1m", "1h", "6s": a window length as the quota column shows it. */
export function formatWindow(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${Number(seconds.toFixed(3))}s`;
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
