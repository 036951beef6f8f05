import type { TopLevelSpec } from 'vega-lite';
import type { UsePoint } from '../local/use-over-time.js';

/** One Region lost, seen from a little before: the minute shares both Regions enforced, and the minute's use. */
export interface LossSeries {
  /** Each Region's adopted minute share, by seconds after the loss (a step at each adoption). */
  shares: { seconds: number; region: string; share: number }[];
  /** Use of the minute limit in the 60 s before each moment: each Region's grants, both, and one ledger's. */
  use: (UsePoint & { series: string })[];
}

const WIDTH = 720;

/**
 * The bench's loss row as a picture: the lost Region's share stays counted (its tail) until grants made up to its
 * fence have left the minute span; then the survivor adopts the whole minute budget, and its use climbs to it.
 */
export function lossChart(title: string | string[], series: LossSeries): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, anchor: 'start' },
    config: { font: 'sans-serif' },
    resolve: { scale: { color: 'independent' } },
    vconcat: [
      {
        width: WIDTH,
        height: 160,
        title: 'Minute share each Region enforces (of 50); the peer is lost at 0 s',
        data: { values: series.shares },
        mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.5 },
        encoding: {
          x: { field: 'seconds', type: 'quantitative', title: 'seconds after the loss' },
          y: { field: 'share', type: 'quantitative', title: 'share', scale: { domain: [0, 50] } },
          color: { field: 'region', type: 'nominal', legend: { orient: 'bottom' } },
        },
      },
      {
        width: WIDTH,
        height: 200,
        title: 'Use of the minute limit (grants in the 60 s before, % of 50)',
        data: { values: series.use },
        mark: { type: 'line', strokeWidth: 1.2 },
        encoding: {
          x: { field: 'seconds', type: 'quantitative', title: 'seconds after the loss' },
          y: { field: 'usedPct', type: 'quantitative', title: '% of the limit' },
          color: { field: 'series', type: 'nominal', legend: { orient: 'bottom', labelLimit: 0 } },
        },
      },
    ],
  };
}
