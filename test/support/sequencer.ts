import { BaseSequencer, type TestSpecification } from 'vitest/node';
import weights from './test-weights.json' with { type: 'json' };

/** A file with no figure, in the cache or in test-weights.json: new, or under a second when the weights were taken. */
const UNKNOWN_MS = 500;

/**
 * Runs the slowest files first within each project (issue 34: `npm test` in three minutes on two workers). Vitest's
 * own order keeps a project's files together (a worker process is reused only within a project: interleaving
 * projects made every switch a fresh process importing everything again, 40-80 s more CPU in a run), and within one
 * runs the longest first by its cache, or the largest file first without one: in a fresh clone (CI) a file's size
 * says little of its time (the lifetimes file is 2.6 KB and 15 s). And its order of projects is by name, which left
 * `unit-isolated`'s one file (the learned-limits mutants, 11 s) to run alone at the end while the other worker was
 * idle. Here the isolated project goes first, beside the first heavy files of the others.
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
    return [...files].sort((a, b) => {
      const order = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder;
      if (order !== 0) return order;
      const isolated = Number(b.project.config.isolate) - Number(a.project.config.isolate);
      if (isolated !== 0) return isolated;
      if (a.project.name !== b.project.name) return a.project.name < b.project.name ? -1 : 1;
      return (ms.get(b) ?? 0) - (ms.get(a) ?? 0);
    });
  }
}
