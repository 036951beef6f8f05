import { describe, expect, it } from 'vitest';
import { busiestSpans, quotaDenialsWithinReservation, spanExcesses } from '../local/soak-report.js';

/**
 * The soaks' judges, without a soak: how the reserved soak counts a QUOTA denial within a reservation
 * (test/soak-reserved.test.ts) and how the classes soak checks the vendor's log span by span
 * (test/soak-classes.test.ts). The soaks wait on real time and run in `npm run test:long`; these run in `npm test`.
 */
describe('the reserved soak report', () => {
  it('counts a QUOTA denial as within the reservation only when its own grants in the span left room', () => {
    const grant = (at: number) => ({ sentAt: at - 5, at, count: 1, granted: 1, grantedAt: at - 2 });
    const denial = (at: number, reason = 'QUOTA') => ({ sentAt: at - 5, at, count: 1, granted: 0, reason });
    const slotMs = () => 100;
    // Reservation 3 per 10 s, margin 1 s: grants at 0, 1 s and 2 s fill it until 11.1 s (window + margin + slot).
    const grants = [grant(0), grant(1000), grant(2000)];
    const within = (asks: ReturnType<typeof denial>[]) =>
      quotaDenialsWithinReservation([...grants, ...asks], { 10: 3 }, 1000, slotMs);
    expect(within([denial(5000)])).toBe(0);
    expect(within([denial(11_000)])).toBe(0);
    expect(within([denial(11_500)])).toBe(1);
    expect(within([denial(30_000), denial(30_000, 'VENDOR_COOLDOWN')])).toBe(1);
  });
});

describe('the vendor-side span check', () => {
  const entry = (at: number, family?: string, quotaKey = 'jti-1') => ({
    at,
    quotaKey,
    served: true,
    ...(family ? { family } : {}),
  });
  const quotas = [
    { family: undefined, limits: [{ limit: 3, windowSeconds: 10 }] },
    { family: 'reports', limits: [{ limit: 2, windowSeconds: 10 }] },
  ];

  it('counts every request for the general limits and only its own for a family, per quota key', () => {
    const log = [
      entry(0, 'reports'),
      entry(1_000),
      entry(9_999, 'reports'),
      entry(5_000, undefined, 'jti-2'),
    ];
    expect(busiestSpans(log, quotas).map((f) => [f.family, f.busiest])).toEqual([
      [undefined, 3],
      ['reports', 2],
    ]);
    expect(spanExcesses(busiestSpans(log, quotas))).toEqual([]);
  });

  it('finds a span above a limit, and ignores refusals and spans of a window apart', () => {
    const crowded = [entry(0, 'reports'), entry(4_000, 'reports'), entry(9_000, 'reports')];
    expect(spanExcesses(busiestSpans(crowded, quotas))).toEqual(['reports 2/10s: 3 served in one span']);
    const apart = [entry(0, 'reports'), entry(9_000, 'reports'), entry(10_000, 'reports')];
    expect(spanExcesses(busiestSpans(apart, quotas))).toEqual([]);
    const refused = [...apart.slice(0, 2), { ...entry(9_500, 'reports'), served: false }];
    expect(spanExcesses(busiestSpans(refused, quotas))).toEqual([]);
  });
});
