import { describe, expect, it } from 'vitest';
import { classesSection } from '../cli/status/class-limits.js';
import type { SetHealthView } from '../cli/status/list-health.js';
import { statusEntries } from '../cli/status/render.js';

/** `token-broker status`: each class's limits, configured or learned, after the table (docs/class-limits.md). */
const NOW = Date.UTC(2026, 0, 5, 9, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();
const set = (id: string, classes?: unknown): SetHealthView =>
  ({
    id,
    environment: 'uat',
    companyRole: 'advisor',
    health: { state: 'HEALTHY', expiresAt: null, lastError: null },
    quotaScope: 'token',
    quota: null,
    ...(classes === undefined ? {} : { classes }),
  }) as unknown as SetHealthView;

describe('token-broker status: classes', () => {
  it('prints each class: learned with when and whose word, configured, or still probing', () => {
    const entries = statusEntries(
      [
        set('uat-advisor', {
          reports: {
            learned: true,
            limits: [
              {
                limit: 10,
                windowSeconds: 60,
                source: 'learned',
                learnedAt: iso(NOW - 120_000),
                provisionalUntil: iso(NOW + 40_000),
              },
            ],
          },
          rebalancing: { learned: true, limits: [] },
          exports: { learned: false, limits: [{ limit: 5, windowSeconds: 3600, source: 'configured' }] },
        }),
        set('uat-execution'),
      ],
      NOW,
    );
    expect(entries[0]?.classes?.reports?.limits[0]).toMatchObject({ limit: 10, source: 'learned' });
    expect(entries[1]).not.toHaveProperty('classes');
    expect(classesSection(entries, NOW)).toBe(
      'CLASSES\n' +
        "  uat-advisor: reports 10 per 1m learned 2m 00s ago (one caller's word until in 40s); " +
        'rebalancing learning (probe: 1 per 10s); exports 5 per 1h configured\n',
    );
    // No set with classes (or an older broker): nothing printed.
    expect(classesSection(statusEntries([set('uat-execution')], NOW), NOW)).toBe('');
  });

  it('prints a raised limit with the limit it replaced, and a rise under trial; --json keeps both', () => {
    const entries = statusEntries(
      [
        set('uat-advisor', {
          reports: {
            learned: true,
            limits: [
              {
                limit: 20,
                windowSeconds: 60,
                source: 'learned',
                learnedAt: iso(NOW - 10_000),
                raisedFrom: 10,
              },
            ],
          },
          rebalancing: {
            learned: true,
            limits: [
              {
                limit: 10,
                windowSeconds: 60,
                source: 'learned',
                learnedAt: iso(NOW - 3600_000),
                trial: { limit: 11, reportedLimit: 20, since: iso(NOW - 120_000) },
              },
            ],
          },
        }),
      ],
      NOW,
    );
    expect(entries[0]?.classes).toEqual({
      reports: {
        learned: true,
        limits: [
          { limit: 20, windowSeconds: 60, source: 'learned', learnedAt: iso(NOW - 10_000), raisedFrom: 10 },
        ],
      },
      rebalancing: {
        learned: true,
        limits: [
          {
            limit: 10,
            windowSeconds: 60,
            source: 'learned',
            learnedAt: iso(NOW - 3600_000),
            trial: { limit: 11, reportedLimit: 20, since: iso(NOW - 120_000) },
          },
        ],
      },
    });
    expect(classesSection(entries, NOW)).toBe(
      'CLASSES\n' +
        '  uat-advisor: reports 20 per 1m learned 10s ago (raised from 10); ' +
        'rebalancing 10 per 1m learned 1h 00m ago (trying 11 per 1m above the kept 10 since 2m 00s ago: 20 reported)\n',
    );
  });

  it('keeps only well-formed class entries from the broker', () => {
    const [entry] = statusEntries(
      [
        set('uat-advisor', {
          reports: {
            learned: true,
            limits: [
              { limit: 'x' },
              { limit: 3, windowSeconds: 5, source: 'learned', raisedFrom: '2', trial: { limit: 4 } },
            ],
          },
          bad: 7,
        }),
      ],
      NOW,
    );
    expect(entry?.classes).toEqual({
      reports: { learned: true, limits: [{ limit: 3, windowSeconds: 5, source: 'learned' }] },
    });
  });
});
