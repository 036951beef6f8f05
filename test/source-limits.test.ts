import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The ledger and the Regions' code stay readable whole (issue 34): no file of shared/ledger or shared/regions over
 * 400 lines. (No function over 80 lines is biome's noExcessiveLinesPerFunction, set for these folders in
 * biome.json: `npm run lint`.)
 */
const FOLDERS = ['shared/ledger', 'shared/regions'];
const MAX_LINES = 400;

function sources(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(folder, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(folder, entry.name)]
        : [],
  );
}

describe('source limits', () => {
  it(`no file of ${FOLDERS.join(' or ')} is over ${MAX_LINES} lines`, () => {
    const files = FOLDERS.flatMap(sources);
    expect(files.length).toBeGreaterThan(10);
    const over = files
      .map((file) => ({ file, lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_LINES);
    expect(over).toEqual([]);
  });
});
