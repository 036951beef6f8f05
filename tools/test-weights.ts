import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Writes test/support/test-weights.json, the seconds each `npm test` file took, from a vitest JSON report: the
 * order test/support/sequencer.ts runs files in where this machine has no cache of them (a fresh clone, CI).
 *
 *   npm run test:weights
 *
 * runs `npm test` with the JSON reporter and writes the file. Files under a second are left out (the sequencer
 * gives them half a second). An order only: a stale figure makes the run slower, never wrong.
 */
const [report] = process.argv.slice(2);
if (!report) throw new Error('usage: tsx tools/test-weights.ts <vitest JSON report>');
const root = path.resolve(import.meta.dirname, '..');
const { testResults } = JSON.parse(readFileSync(report, 'utf8')) as {
  testResults: { name: string; startTime: number; endTime: number }[];
};
const weights = Object.fromEntries(
  testResults
    .map(
      (file) =>
        [
          path.relative(root, file.name).split(path.sep).join('/'),
          (file.endTime - file.startTime) / 1000,
        ] as const,
    )
    .filter(([, seconds]) => seconds >= 1)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([file, seconds]) => [file, Math.round(seconds * 10) / 10]),
);
writeFileSync(path.join(root, 'test/support/test-weights.json'), `${JSON.stringify(weights, null, 2)}\n`);
console.info(`test/support/test-weights.json: ${Object.keys(weights).length} files`);
