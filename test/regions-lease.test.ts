import { describe, expect, it } from 'vitest';
import { RegionalLedgerModel } from '../local/regional-ledger-model.js';
import { checkVendorWindows } from '../local/vendor-window-check.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { adoptionOf, type RegionShare } from '../shared/ledger/region-share.js';
import type { RingSnapshot } from '../shared/ledger/ring-snapshot.js';
import {
  allowedShare,
  type Budget,
  CLOCK_BOUND_MS,
  claimDropsAt,
  claimOf,
  demandOf,
  fenceAt,
  LEASE_MS,
  type LeaseRecord,
  leaseHolds,
  planRenewal,
  RENEW_MS,
  renewsEarly,
  SHORT_DEMAND_ASKS,
  shareTargets,
  snapshotInSpan,
  tailOf,
} from '../shared/regions/lease.js';

/** The vendor's general limits as the ledger plans them: 50 per 60 s and 1000 per 3600 s, spans plus 3 s. */
const SPECS = planFor(rateLimitSettingsSchema.parse({})).general;
const [MINUTE, HOUR] = SPECS.map(
  (s): Budget => ({ key: s.key, limit: s.limit, windowMs: s.windowMs, spanMs: s.spanMs }),
) as [Budget, Budget];
const T0 = 1_800_000_000_000;

/** A record renewed at T0 whose ledger had granted `minute` in the slot [T0 - 1 s, T0) and `hour` in its hour slot. */
function record(shares: { minute: number; hour: number }, granted = { minute: 0, hour: 0 }): LeaseRecord {
  const snapshot: RingSnapshot = {
    at: T0,
    rings: {
      [MINUTE.key]: { windowMs: 60_000, slotMs: 1000, slots: [{ start: T0 - 1000, count: granted.minute }] },
      [HOUR.key]: {
        windowMs: 3_600_000,
        slotMs: 60_000,
        slots: [{ start: T0 - 60_000, count: granted.hour }],
      },
    },
  };
  return {
    region: 'peer',
    renewedAt: T0,
    leaseUntil: T0 + LEASE_MS,
    shares: { [MINUTE.key]: shares.minute, [HOUR.key]: shares.hour },
    snapshot,
  };
}

describe('the fence and the lease', () => {
  it('fences one clock bound before the lease ends, and a reader counts it one clock bound after', () => {
    const r = record({ minute: 25, hour: 500 });
    expect(fenceAt(r)).toBe(T0 + LEASE_MS - CLOCK_BOUND_MS);
    expect(leaseHolds(r, T0 + LEASE_MS + CLOCK_BOUND_MS - 1)).toBe(true);
    expect(leaseHolds(r, T0 + LEASE_MS + CLOCK_BOUND_MS)).toBe(false);
  });
});

describe('claimOf', () => {
  it('while the lease holds: the share when it is more than the snapshot', () => {
    expect(claimOf(record({ minute: 25, hour: 500 }, { minute: 10, hour: 10 }), MINUTE, T0)).toBe(25);
  });

  it('a shrunk share is not free while the grants made under the old one are in the span', () => {
    // Shrunk to 5 after granting 40 in [T0 - 1 s, T0): those count until the slot's end plus the clock bound
    // leaves the span (60 s window plus 3 s margin).
    const r = record({ minute: 5, hour: 500 }, { minute: 40, hour: 40 });
    const leaves = T0 + CLOCK_BOUND_MS + MINUTE.spanMs;
    expect(claimOf(r, MINUTE, T0)).toBe(40);
    expect(claimOf(r, MINUTE, leaves - 1)).toBe(40);
    // By then the lease has lapsed and its tail gone too: only the snapshot could count, and it has aged out.
    expect(claimOf(r, MINUTE, leaves)).toBe(5);
  });

  it('after the lapse: the share counts as the tail until grants made up to the fence leave the span', () => {
    const r = record({ minute: 25, hour: 500 });
    const tailEnds = r.leaseUntil + CLOCK_BOUND_MS + MINUTE.spanMs;
    expect(leaseHolds(r, tailEnds - 1)).toBe(false);
    expect(claimOf(r, MINUTE, tailEnds - 1)).toBe(25);
    expect(claimOf(r, MINUTE, tailEnds)).toBe(0);
    expect(claimDropsAt(r, [MINUTE], T0)).toEqual([tailEnds]);
  });

  it("the hour's tail is what the minute share allows between the snapshot and the fence, not the hour share", () => {
    const r = record({ minute: 50, hour: 500 }, { minute: 0, hour: 100 });
    // 29 s between the snapshot and the fence: one minute window's worth, 50.
    expect(tailOf(r, HOUR)).toBe(50);
    expect(claimOf(r, HOUR, T0)).toBe(150);
    // A longer interval (a record whose snapshot is older than its fence by more than a minute) allows more.
    expect(tailOf({ ...r, snapshot: { ...r.snapshot, at: T0 - 60_000 } }, HOUR)).toBe(100);
  });

  it('counts a snapshot slot that may be in the span once the clocks differ by the bound', () => {
    const r = record({ minute: 0, hour: 0 }, { minute: 7, hour: 7 });
    // The slot [T0 - 1 s, T0): in the span ending at `now` while T0 + bound > now - span.
    const edge = T0 + CLOCK_BOUND_MS + MINUTE.spanMs;
    expect(claimOf(r, MINUTE, edge - 1)).toBe(7);
    expect(claimOf(r, MINUTE, edge)).toBe(0);
    expect(claimOf(r, MINUTE, edge, { clockBoundMs: 0 })).toBe(0);
    expect(claimOf(r, MINUTE, edge - CLOCK_BOUND_MS - 1, { clockBoundMs: 0 })).toBe(7);
  });

  it('a Region that never leased claims its floor; a share it does not name counts as the whole limit', () => {
    expect(claimOf(undefined, MINUTE, T0)).toBe(0);
    expect(claimOf(undefined, MINUTE, T0, { floor: 3 })).toBe(3);
    const r = record({ minute: 10, hour: 100 });
    expect(claimOf({ ...r, shares: {} }, MINUTE, T0)).toBe(50);
  });

  it('a fenced floor counts after the tail, on top of nothing else', () => {
    const r = record({ minute: 25, hour: 500 });
    expect(claimOf(r, MINUTE, r.leaseUntil + CLOCK_BOUND_MS + MINUTE.spanMs, { floor: 2 })).toBe(2);
  });
});

describe('allowedShare', () => {
  it('never more than the limit minus the claim, nor the target, nor below 0', () => {
    expect(allowedShare(30, 25, MINUTE)).toBe(25);
    expect(allowedShare(20, 25, MINUTE)).toBe(20);
    expect(allowedShare(20, 60, MINUTE)).toBe(0);
  });
});

describe('shareTargets', () => {
  const budgets = [MINUTE, HOUR];
  /** Nothing in use: the whole limit is free. */
  const idle = {};

  it('splits what is free by demand with a floor, every budget adding up to its limit', () => {
    const t = shareTargets({ home: 9, peer: 1 }, budgets, 0.2, idle);
    // 10 each (a fifth of 50), the other 30 nine to one.
    expect(t.home?.[MINUTE.key]).toBe(37);
    expect(t.peer?.[MINUTE.key]).toBe(13);
    expect(t.home?.[HOUR.key]).toBe(740);
    expect(t.peer?.[HOUR.key]).toBe(260);
  });

  it('gives a Region without demand nothing (active/passive: the active Region holds the whole budget)', () => {
    const t = shareTargets({ home: 3, peer: 0 }, budgets, 0.1, idle);
    expect(t.home).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
    expect(t.peer).toEqual({ [MINUTE.key]: 0, [HOUR.key]: 0 });
  });

  it('gives a Region with any demand, however small, at least the floor', () => {
    const t = shareTargets({ home: 1, peer: 0.01 }, budgets, 0.02, idle);
    // The floor (1 of 50, 20 of 1000) and its part of the rest by demand: 0.5 of 48 (the odd unit to home's
    // larger remainder), 9.5 of 960 (the odd unit its own).
    expect(t.peer?.[MINUTE.key]).toBe(1);
    expect(t.peer?.[HOUR.key]).toBe(30);
  });

  it('with no demand anywhere: an even split of what is free', () => {
    expect(shareTargets({ home: 0, peer: 0 }, budgets, 0.1, idle).peer?.[MINUTE.key]).toBe(25);
    const used = { home: { [MINUTE.key]: 10 }, peer: { [MINUTE.key]: 30 } };
    expect(shareTargets({ home: 0, peer: 0 }, [MINUTE], 0.1, used)).toEqual({
      home: { [MINUTE.key]: 15 },
      peer: { [MINUTE.key]: 35 },
    });
  });

  it('splits only the free part by demand, on top of each Region’s use, adding up to the limit', () => {
    const used = { home: { [MINUTE.key]: 10 }, peer: { [MINUTE.key]: 30 } };
    const t = shareTargets({ home: 3, peer: 1 }, [MINUTE], 0, used);
    // 10 free: 7.5 and 2.5, the odd unit to the larger remainder (home, first in order on a tie).
    expect(t.home?.[MINUTE.key]).toBe(18);
    expect(t.peer?.[MINUTE.key]).toBe(32);
  });

  it('a Region without demand keeps what it uses and gets nothing of what is free', () => {
    const used = { home: { [MINUTE.key]: 5 }, peer: { [MINUTE.key]: 20 } };
    const t = shareTargets({ home: 1, peer: 0 }, [MINUTE], 0.1, used);
    expect(t).toEqual({ home: { [MINUTE.key]: 30 }, peer: { [MINUTE.key]: 20 } });
  });
});

describe('planRenewal: the renew and adopt order', () => {
  /** The own ledger's snapshot: nothing granted yet. */
  const ownSnapshot: RingSnapshot = { at: T0, rings: {} };
  const base = { region: 'home', demand: 1, budgets: [MINUTE, HOUR], now: T0, targetFloor: 0.1, ownSnapshot };
  const held = (minute: number, hour: number, fence = T0 + 5_000): RegionShare => ({
    limits: { [MINUTE.key]: minute, [HOUR.key]: hour },
    fenceAt: fence,
    version: 7,
  });

  it('a lower share is in force before the write (the cap): lowered rings at their new share, the others and the fence as they are', () => {
    const plan = planRenewal({ ...base, other: { ...record({ minute: 25, hour: 500 }), demand: 1 } });
    expect(plan.shares[MINUTE.key]).toBe(25);
    expect(plan.leaseUntil).toBe(T0 + LEASE_MS);
    expect(plan.fenceAt).toBe(T0 + LEASE_MS - CLOCK_BOUND_MS);
    const capped = adoptionOf(
      held(50, 100),
      { limits: plan.shares, fenceAt: plan.fenceAt, version: 8 },
      'cap',
    );
    expect(capped).toEqual({ outcome: 'adopted', share: { ...held(25, 100), version: 8 } });
  });

  it('a higher share is only written: the cap leaves the share held as it is (it stamps it), the adoption after raises it', () => {
    const plan = planRenewal({ ...base, other: undefined });
    expect(plan.shares).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
    const capped = adoptionOf(held(0, 0), { limits: plan.shares, fenceAt: plan.fenceAt, version: 8 }, 'cap');
    expect(capped.share).toEqual({ ...held(0, 0), version: 8 });
    const adopted = adoptionOf(
      capped.share,
      { limits: plan.shares, fenceAt: plan.fenceAt, version: 8 },
      'replace',
    );
    expect(adopted).toMatchObject({
      outcome: 'adopted',
      share: { limits: plan.shares, fenceAt: plan.fenceAt },
    });
  });

  it('never takes more than the limit minus the other Region’s claim, whatever the target', () => {
    const plan = planRenewal({
      ...base,
      other: { ...record({ minute: 10, hour: 200 }, { minute: 45, hour: 45 }), demand: 0 },
    });
    // The other Region's demand is 0, so the target is the whole budget; its grants still in the span are not.
    expect(plan.shares[MINUTE.key]).toBe(5);
  });

  it('with the own snapshot: keeps what it uses and takes its part of what the other Region leaves free', () => {
    const own = record({ minute: 0, hour: 0 }, { minute: 30, hour: 30 }).snapshot;
    const plan = planRenewal({
      ...base,
      ownSnapshot: own,
      other: { ...record({ minute: 10, hour: 10 }, { minute: 10, hour: 10 }), demand: 1 },
    });
    // 50 - 30 used - 10 claimed = 10 free, half each (equal demand, floor 10 % = 5 each).
    expect(plan.shares[MINUTE.key]).toBe(35);
  });

  it('a lapsed Region’s last demand is not demand: the survivor targets the whole budget', () => {
    const lapsed = { ...record({ minute: 25, hour: 500 }), demand: 5 };
    const now = lapsed.leaseUntil + CLOCK_BOUND_MS + HOUR.spanMs;
    const plan = planRenewal({ ...base, now, other: lapsed });
    expect(plan.shares).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
  });
});

describe('adoptionOf: monotone in the lease record (issue 33)', () => {
  const MIN = MINUTE.key;
  const share = (limit: number, fenceAt: number, version?: number): RegionShare => ({
    limits: { [MIN]: limit },
    fenceAt,
    ...(version === undefined ? {} : { version }),
  });

  it("refuses a slow run's adoption of an older record once a newer run capped: the share the newer record says stays", () => {
    // X wrote version 5 (22) and is slow to adopt it; Y read version 5, capped the ledger at 0 stamped 6, wrote 6.
    const capped = adoptionOf(share(5, T0), share(0, T0 + 36_000, 6), 'cap').share;
    expect(capped).toEqual(share(0, T0, 6));
    expect(adoptionOf(capped, share(22, T0 + 29_000, 5), 'replace')).toEqual({
      outcome: 'stale',
      share: capped,
    });
    // Fences alone (the rule before versions) let it through: X's fence is later than the one the cap kept.
    expect(adoptionOf(share(0, T0), share(22, T0 + 29_000), 'replace').outcome).toBe('adopted');
    // Y's own adoption of version 6 is at least as new.
    expect(adoptionOf(capped, share(0, T0 + 35_000, 6), 'replace').outcome).toBe('adopted');
  });

  it('a cap lowers a ring the record to be written does not name to 0 (a ring of another learned view)', () => {
    // Run A, its learned cache showing a class's 60 s ring, wrote and adopted 5 of it; run B, its cache still on
    // the probe, caps before writing a record that names only the probe. The other Region reads B's record: the
    // 60 s ring unnamed, bounded there only by the probe's share (tailOf), which a plan on A's view does not check.
    const learned = 'reports/1aao.c';
    const probe = 'reports/7ps.c';
    const held: RegionShare = { limits: { [MIN]: 50, [learned]: 5 }, fenceAt: T0 + 30_000, version: 6 };
    const capped = adoptionOf(
      held,
      { limits: { [MIN]: 50, [probe]: 1 }, fenceAt: T0 + 31_000, version: 7 },
      'cap',
    );
    expect(capped.share).toEqual({ limits: { [MIN]: 50, [learned]: 0 }, fenceAt: T0 + 30_000, version: 7 });
  });

  it('a cap only lowers, whatever it meets, and its version never goes back', () => {
    const held = share(30, T0 + 20_000, 9);
    expect(adoptionOf(held, share(40, T0 + 40_000, 7), 'cap')).toEqual({ outcome: 'unchanged', share: held });
    expect(adoptionOf(held, share(10, T0 + 15_000, 10), 'cap').share).toEqual(share(10, T0 + 15_000, 10));
    // No share yet: the stamp alone is written (an empty share grants the floor, as no share does).
    expect(adoptionOf(undefined, share(10, T0, 3), 'cap')).toEqual({
      outcome: 'adopted',
      share: { limits: {}, fenceAt: 0, version: 3 },
    });
  });

  it('a failed lease write leaves the next good record adoptable: the stamp anticipates no more than any later write gives', () => {
    // Y read version 5, capped stamped 6, and its write failed: the next renewal reads 5 (or later) and writes 6
    // (or later), which is at least as new.
    const capped = adoptionOf(share(20, T0, 4), share(20, T0 + 30_000, 6), 'cap').share;
    expect(adoptionOf(capped, share(25, T0 + 40_000, 6), 'replace').outcome).toBe('adopted');
  });

  it('without versions on either side, the later fence wins, as before them', () => {
    expect(adoptionOf(share(5, T0 + 10, 4), share(9, T0), 'replace').outcome).toBe('stale');
    expect(adoptionOf(share(5, T0), share(9, T0 + 10, 4), 'replace').outcome).toBe('adopted');
  });
});

describe('renewsEarly: between regular renewals', () => {
  const own = (minute: number, demand: number): LeaseRecord => ({
    ...record({ minute, hour: 1000 }),
    demand,
  });
  const budgets = [MINUTE];

  it('takes what the other freed for a Region with demand, by at least a tenth of the limit', () => {
    const plan = { shares: { [MINUTE.key]: 35 }, targets: { home: { [MINUTE.key]: 35 } } };
    const input = { region: 'home', plan, other: undefined, budgets };
    expect(renewsEarly({ ...input, own: own(30, 1), demand: 1 })).toBe(true);
    expect(renewsEarly({ ...input, own: own(31, 1), demand: 1 })).toBe(false);
    expect(renewsEarly({ ...input, own: own(30, 0), demand: 0 })).toBe(false);
  });

  it('gives back what the other Region waits for, and publishes a demand the other must see', () => {
    const other: LeaseRecord = { ...record({ minute: 25, hour: 1000 }), region: 'peer', demand: 2 };
    const lower = {
      shares: { [MINUTE.key]: 10 },
      targets: { home: { [MINUTE.key]: 10 }, peer: { [MINUTE.key]: 40 } },
    };
    expect(renewsEarly({ region: 'home', plan: lower, own: own(25, 0.1), other, demand: 0.1, budgets })).toBe(
      true,
    );
    const waited = { ...lower, targets: { ...lower.targets, peer: { [MINUTE.key]: 25 } } };
    expect(
      renewsEarly({ region: 'home', plan: waited, own: own(25, 0.1), other, demand: 0.1, budgets }),
    ).toBe(false);
    // Held back by the other's claim (target 40, share 25): renew when the demand rose past 1.5 times the record's.
    const held = { shares: { [MINUTE.key]: 25 }, targets: { home: { [MINUTE.key]: 40 } } };
    expect(renewsEarly({ region: 'home', plan: held, own: own(25, 1), other, demand: 1.6, budgets })).toBe(
      true,
    );
    expect(renewsEarly({ region: 'home', plan: held, own: own(25, 1), other, demand: 1.4, budgets })).toBe(
      false,
    );
  });
});

describe('demandOf', () => {
  it('is the highest rate of its windows, the short one only from a few asks on', () => {
    expect(
      demandOf([
        { windowMs: RENEW_MS, count: 20 },
        { windowMs: 60_000, count: 20 },
      ]),
    ).toBe(2);
    // One ask of a sparse Region in the last 10 s is not 0.1 a second: the minute and the hour say what it is.
    expect(
      demandOf([
        { windowMs: RENEW_MS, count: SHORT_DEMAND_ASKS - 1 },
        { windowMs: 60_000, count: 2 },
        { windowMs: 3_600_000, count: 72 },
      ]),
    ).toBeCloseTo(2 / 60);
    // No ask in the minute, some in the hour: still demand, so it keeps its part of what is free.
    expect(
      demandOf([
        { windowMs: 60_000, count: 0 },
        { windowMs: 3_600_000, count: 36 },
      ]),
    ).toBe(0.01);
  });
});

describe('the vendor-side check', () => {
  const limits = [{ limit: 3, windowMs: 60_000 }];

  it('refuses a request that makes a closed window [t - W, t] hold more than the limit', () => {
    expect(checkVendorWindows([0, 1, 2, 60_000], limits)).toEqual({ rejected: 1, mostInAnySpan: [4] });
    expect(checkVendorWindows([0, 1, 2, 60_001], limits)).toEqual({ rejected: 0, mostInAnySpan: [3] });
  });

  it('a refused request counts in no window', () => {
    expect(checkVendorWindows([0, 1, 2, 3, 60_001, 60_002], limits).rejected).toBe(1);
  });
});

describe("the simulation's regional ledger", () => {
  it('grants within its share per span as the ledger counts it, nothing before its first lease or after its fence', () => {
    const ledger = new RegionalLedgerModel(SPECS);
    expect(ledger.grant(T0)).toBe(false);
    ledger.adoptShare({ [MINUTE.key]: 3, [HOUR.key]: 1000 }, T0 + 200_000);
    expect([0, 1, 2, 3].map((i) => ledger.grant(T0 + i * 1000))).toEqual([true, true, true, false]);
    // The first grant's slot leaves the span (60 s + 3 s margin) once its sub-slot's end is past.
    expect(ledger.grant(T0 + MINUTE.spanMs)).toBe(false);
    expect(ledger.grant(T0 + MINUTE.spanMs + 1000)).toBe(true);
    expect(ledger.grant(T0 + 200_000)).toBe(false);
  });

  it('snapshots every slot with grants, with its start time', () => {
    const ledger = new RegionalLedgerModel(SPECS);
    ledger.adoptShare({ [MINUTE.key]: 50, [HOUR.key]: 1000 }, T0 + 200_000);
    ledger.grant(T0 + 500);
    ledger.grant(T0 + 2500);
    const snapshot = ledger.snapshot(T0 + 3000);
    expect(snapshot.at).toBe(T0 + 3000);
    expect(snapshot.rings[MINUTE.key]).toEqual({
      windowMs: 60_000,
      slotMs: 1000,
      slots: [
        { start: T0 + 2000, count: 1 },
        { start: T0, count: 1 },
      ],
    });
    expect(snapshotInSpan(snapshot, MINUTE.key, T0 + 1000, 0)).toBe(1);
  });
});
