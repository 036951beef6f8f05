import type { TopLevelSpec } from 'vega-lite';
import type { UsePoint } from '../local/use-over-time.js';

/** One case of the reservations bench, over its simulated minutes. */
export interface ReservationsCaseSeries {
  name: string;
  /** Of the minute limit (50), in the 60 s before each moment: all consumers. */
  use: UsePoint[];
  /** The reserved consumer's waits, by the moment it wanted its permit. */
  waits: { seconds: number; waitSeconds: number }[];
}

const WIDTH = 720;

/**
 * The bench's table as pictures: the minute limit's use over time (every case near 100 % when the greedy
 * consumers fill it), and the reserved consumer's wait for each permit it wanted (flat near 0 with a sized
 * reservation; long and growing without one).
 */
export function reservationsChart(
  title: string | string[],
  cases: readonly ReservationsCaseSeries[],
): TopLevelSpec {
  const color = {
    field: 'case',
    type: 'nominal' as const,
    legend: { orient: 'bottom' as const, columns: 1, labelLimit: 0 },
  };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start' },
    config: { font: 'sans-serif' },
    vconcat: [
      {
        width: WIDTH,
        height: 200,
        title: 'Use of the minute limit (permits granted in the 60 s before, of 50)',
        data: { values: cases.flatMap((c) => c.use.map((p) => ({ case: c.name, ...p }))) },
        mark: { type: 'line', strokeWidth: 1.2 },
        encoding: {
          x: { field: 'seconds', type: 'quantitative', title: 'simulated seconds' },
          y: { field: 'usedPct', type: 'quantitative', title: '% of the limit' },
          color,
        },
      },
      {
        width: WIDTH,
        height: 200,
        title: 'order-service: wait for each permit it wanted',
        data: { values: cases.flatMap((c) => c.waits.map((w) => ({ case: c.name, ...w }))) },
        mark: { type: 'point', size: 12, filled: true },
        encoding: {
          x: {
            field: 'seconds',
            type: 'quantitative',
            title: 'simulated seconds (when it wanted the permit)',
          },
          // Symlog: the reserved cases' waits of a second or less and first come, first served's minutes, together.
          y: {
            field: 'waitSeconds',
            type: 'quantitative',
            title: 'wait (s)',
            scale: { type: 'symlog' },
            axis: { values: [0, 1, 3, 10, 30, 100, 300, 1000] },
          },
          color,
        },
      },
    ],
    resolve: { scale: { color: 'shared' } },
  };
}
