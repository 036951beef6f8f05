import type { TopLevelSpec } from 'vega-lite';
import type { SoakResult } from './soak.js';
import { writeChart } from './svg-chart.js';
import { useOverTime } from './use-over-time.js';

/**
 * The soak's table as a picture: for each of the vendor's limits, the share of it that the requests the vendor
 * accepted took in the window before each second, per soak run (mode) and credential set. The vendor counts per
 * token and a set's token changes every lifetime: each second shows the busiest of the set's tokens (the old
 * one's requests count for it until they leave its window). Near 100 % is the quota used; above it the vendor
 * refuses.
 */
export function soakChart(title: string | string[], results: readonly SoakResult[]): TopLevelSpec {
  const limits = results[0]?.settings.limits ?? [];
  const panels = limits.map((limit) => {
    const values = results.flatMap((result) => {
      const runMs = result.settings.lifetimes * result.settings.tokenLifetimeSeconds * 1000;
      const mode = result.rows[0]?.mode ?? result.settings.windowKind;
      const sets = [...new Set(result.vendorAnswers.map((answer) => answer.set))].sort();
      return sets.flatMap((set) => {
        const accepted = result.vendorAnswers.filter(
          (answer) => answer.set === set && answer.status !== 429 && answer.status !== 401,
        );
        const window = { limit: limit.limit, windowMs: limit.windowSeconds * 1000 };
        const perToken = [...new Set(accepted.map((answer) => answer.token))].map((token) => {
          const own = accepted.filter((answer) => answer.token === token);
          return useOverTime(
            own.map((answer) => ({ time: answer.atMs, count: 1 })),
            window,
            0,
            runMs,
            1000,
          );
        });
        return (perToken[0] ?? []).map((point, index) => ({
          run: `${mode}, ${set}`,
          seconds: point.seconds,
          usedPct: Math.max(...perToken.map((points) => points[index]?.usedPct ?? 0)),
        }));
      });
    });
    return {
      width: 720,
      height: 180,
      title: `${limit.limit} per ${limit.windowSeconds} s: accepted requests in the ${limit.windowSeconds} s before, of ${limit.limit}`,
      data: { values },
      mark: { type: 'line' as const, strokeWidth: 1 },
      encoding: {
        x: { field: 'seconds', type: 'quantitative' as const, title: 'seconds since the consumers started' },
        y: { field: 'usedPct', type: 'quantitative' as const, title: '% of the limit' },
        color: {
          field: 'run',
          type: 'nominal' as const,
          legend: { orient: 'bottom' as const, columns: 1, labelLimit: 0 },
        },
      },
    };
  });
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start' },
    config: { font: 'sans-serif' },
    vconcat: panels,
    resolve: { scale: { color: 'shared' } },
  };
}

/** Writes the chart of these soak runs as `<name>.svg` (svg-chart.ts's folder) and returns its path. */
export function writeSoakChart(
  name: string,
  title: string | string[],
  results: readonly SoakResult[],
): Promise<string> {
  return writeChart(name, soakChart(title, results));
}
