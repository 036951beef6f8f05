import { describe, expect, it } from 'vitest';
import { reservationFor, reservedSoakSettings, runSoak, SOAK_DEFAULTS, soakFailures } from '../local/soak.js';
import { percentile } from '../local/soak-report.js';
import { SHORT_SOAK, SOAK_TIMEOUT_MS } from './support/soak-case.js';

/**
 * The reserved-consumer soak (`npm run soak -- reserved`), shortened: one 60 s token lifetime of the local broker
 * with 20 consumers on prod-execution over HTTP + SigV4, `order-service` steady at 20 per 10 s with its
 * reservation, the 19 others greedy. With the short soak's margins (test/support/soak-case.ts says why they hold
 * under load): a 1 s ledger margin, so the reservation is ⌈20 × 11 / 10⌉ + 1 = 23 per 10 s and 123 per 60 s.
 *
 * It asserts what load cannot change: the vendor sandbox answered no 429 (it counts sliding windows, so it never
 * accepted more than a limit in any span) and no 401 the broker could have avoided, the reserved consumer was
 * never denied for QUOTA while its own grants left room in its reservation (the ledger's promise), one login per
 * lifetime, no secret in a log, no client error. Its served share and waits depend on the machine: printed only.
 * It waits on real time (test/support/soak-case.ts): `npm run test:long` runs it. The report's own rule is tested
 * in test/soak-report.test.ts, in `npm test`.
 */
describe('end-to-end soak (a reserved consumer among 20 greedy ones)', () => {
  it(
    'never lets the vendor answer 429 and never denies the reserved consumer for QUOTA within its reservation',
    async () => {
      const settings = reservedSoakSettings({ ...SHORT_SOAK, lifetimes: 1 }, true);
      expect(settings.reserved?.reservation).toEqual({ 10: 23, 60: 123 });
      expect(reservationFor(20, SOAK_DEFAULTS.limits, SOAK_DEFAULTS.marginSeconds)).toEqual({
        10: 22,
        60: 122,
      });

      const result = await runSoak(settings);
      expect(result.rows).toHaveLength(1);
      const [row] = result.rows;
      const figures = row?.reserved;
      if (!row || !figures) throw new Error('no reserved consumer in the soak');
      console.info(
        JSON.stringify({
          wanted: figures.wanted,
          served: figures.served,
          waitP50Ms: percentile(figures.waitsMs, 50),
          waitP99Ms: percentile(figures.waitsMs, 99),
          quotaDenials: figures.quotaDenials,
          otherDenials: figures.otherDenials,
          quotaUsedPct: row.quotaUsedPct,
          busiest: row.busiest,
          vendor401InTransit: row.vendor401InTransit,
          slowestVendorMs: row.slowestVendorMs,
        }),
      );
      expect(row.vendorRequests).toBeGreaterThan(0);
      expect(figures.permitsGranted).toBeGreaterThan(0);
      expect(row.vendor429).toBe(0);
      expect(row.sandbox429).toBe(0);
      expect(figures.quotaDenialsWithinReservation).toBe(0);
      expect(soakFailures(result)).toEqual([]);
      expect(result.clientErrors).toEqual({});
    },
    SOAK_TIMEOUT_MS,
  );
});
