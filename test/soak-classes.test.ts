import { describe, expect, it } from 'vitest';
import {
  CLASSES_SOAK_DEFAULTS,
  type ClassesSoakSettings,
  type ClassesVariant,
  runClassesSoak,
} from '../local/soak-classes.js';
import { SHORT_SOAK } from './support/soak-case.js';

/**
 * The classes soak (`npm run soak -- classes`), shortened: the local broker over HTTP + SigV4, 8 consumers each
 * sending general requests and one class's (reports or rebalancing) for 8 s of real time, against a sandbox whose
 * windows are compressed to 3 s and 9 s (the families' limits 5-10 times below the general ones). It asserts only
 * what load cannot change: no vendor 429 after learning (none at all where the limits are configured), and no
 * span of any window, general or a family's, held more than its limit in the vendor's own log. The short soak's
 * 1 s send margin keeps a starved process from turning a stall into a 429 (test/support/soak-case.ts).
 *
 * VARIANTS: `learned`, classes configured with paths only (their limits learned from the vendor's answers), and
 * `configured`, the same paths with the sandbox's limits.
 *
 * It waits on real time (test/support/soak-case.ts): `npm run test:long` runs it. The span check it relies on is
 * tested in test/soak-report.test.ts, in `npm test`.
 */
const VARIANTS: ClassesVariant[] = ['configured', 'learned'];

const SHORT_CLASSES: Omit<ClassesSoakSettings, 'variant'> = {
  ...CLASSES_SOAK_DEFAULTS,
  ...SHORT_SOAK,
  windowKind: 'sliding',
  consumers: 8,
  durationSeconds: 8,
  limits: [
    { limit: 30, windowSeconds: 3 },
    { limit: 60, windowSeconds: 9 },
  ],
  families: [
    {
      name: 'reports',
      pathPrefix: '/reports/',
      limits: [
        { limit: 6, windowSeconds: 3 },
        { limit: 12, windowSeconds: 9 },
      ],
    },
    {
      name: 'rebalancing',
      pathPrefix: '/rebalancing/',
      limits: [
        { limit: 3, windowSeconds: 3 },
        { limit: 6, windowSeconds: 9 },
      ],
    },
  ],
};

describe.each(VARIANTS)('classes soak, short (%s class limits)', (variant) => {
  it('lets the vendor answer no 429 after learning from a limit already named, and keeps every span of every window within its limit', async () => {
    const result = await runClassesSoak({ ...SHORT_CLASSES, variant });
    console.info(
      JSON.stringify(
        result.rows.map((row) => ({
          quota: row.quota,
          requests: row.requests,
          served: row.served,
          vendor429Learning: row.vendor429Learning,
          quotaUsedPct: row.quotaUsedPct,
          busiest: row.busiest.map((f) => `${f.busiest}/${f.limit}`),
        })),
      ),
    );
    expect(result.rows.map((row) => row.quota)).toEqual(['general', 'reports', 'rebalancing']);
    for (const row of result.rows) {
      expect(row.served, row.quota).toBeGreaterThan(0);
      // After learning, no 429 from a limit an answer had named; one at most from a limit no answer had named yet
      // (the vendor names only its tightest window: docs/class-limits.md, "A limit not yet named").
      expect(row.vendor429After - row.vendor429AfterUnnamed, row.quota).toBe(0);
      expect(row.vendor429PerUnnamedLimit, row.quota).toBeLessThanOrEqual(1);
      if (variant === 'configured') expect(row.vendor429Learning, row.quota).toBe(0);
    }
    expect(result.excesses).toEqual([]);
    // A 429 the client could not wait out within the run is its only error, and only for such a limit.
    const { RATE_LIMIT_EXCEEDED: rateLimited = 0, ...otherErrors } = result.clientErrors;
    expect(otherErrors).toEqual({});
    expect(rateLimited).toBeLessThanOrEqual(result.rows.reduce((n, row) => n + row.vendor429AfterUnnamed, 0));
    expect(result.secretsInLogs).toBe(0);
  }, 60_000);
});
