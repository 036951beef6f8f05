import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/**
 * Charts next to the soak's and the bench's tables: a vega-lite spec, compiled to vega and rendered by vega's own
 * SVG renderer (no canvas, no browser: nothing native to install). In local/, which the bench may import, so
 * both write their charts with it (docs/structure.md).
 */

/** Where charts are written: `CHARTS_DIR` when set (e.g. `docs/charts` for the examples), else a temp folder. */
export function chartsDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.CHARTS_DIR || path.join(tmpdir(), 'token-broker-charts'));
}

/** The spec as an SVG document. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Writes the chart as `<name>.svg` in `directory` and returns the file's path (to print). */
export async function writeChart(
  name: string,
  spec: TopLevelSpec,
  directory: string = chartsDirectory(),
): Promise<string> {
  mkdirSync(directory, { recursive: true });
  const file = path.join(directory, `${name}.svg`);
  writeFileSync(file, `${await renderSvg(spec)}\n`);
  return file;
}
