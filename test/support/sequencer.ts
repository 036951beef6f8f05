import { BaseSequencer, type TestSpecification } from 'vitest/node';
import weights from './test-weights.json' with { type: 'json' };

/** A file with no figure, in the cache or in test-weights.json: new, or under a second when the weights were taken. */
const UNKNOWN_MS = 500;

/**
 * Runs the slowest files first, whatever their project (issue 34: `npm test` in three minutes on two workers).
 * Vitest's own order puts projects one after another by name and, within one, the longest first by its cache, or
 * the largest file first without one: in a fresh clone (CI) file size says little of a file's time (the
 * lifetimes file is 2.6 KB and 15 s), and a heavy file of the last project (`unit-isolated`'s mutants, 11 s)
 * ran alone at the end of the run while the other worker was idle: 44 s of 207 with one file running.
 *
 * A file's time: vitest's cache of this machine's last run of it, else test-weights.json (seconds per file of
 * `npm test` on the 2-core machine, refreshed with `npm run test:weights`), else UNKNOWN_MS. Only the order of
 * the files changes, never what runs.
 */
export class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const known = weights as Record<string, number>;
    const msOf = (spec: TestSpecification): number => {
      const cached = this.ctx.cache.getTestSpecificationResult(spec);
      if (cached) return cached.duration;
      const file = spec.moduleId
        .slice(root.length + 1)
        .split('\\')
        .join('/');
      return (known[file] ?? UNKNOWN_MS / 1000) * 1000;
    };
    const ms = new Map(files.map((spec) => [spec, msOf(spec)]));
    return [...files].sort((a, b) => (ms.get(b) ?? 0) - (ms.get(a) ?? 0));
  }
}
