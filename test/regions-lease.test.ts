import { describe, expect, it } from 'vitest';
import { RegionalLedgerModel } from '../local/regional-ledger-model.js';
import { checkVendorWindows } from '../local/vendor-window-check.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import type { RingSnapshot } from '../shared/ledger/ring-snapshot.js';
import {
  allowedShare,
  type Budget,
  CLOCK_BOUND_MS,
  claimDropsAt,
  claimOf,
  fenceAt,
  LEASE_MS,
  type LeaseRecord,
  leaseHolds,
  planRenewal,
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

  it('splits by demand with a floor, every budget adding up to its limit', () => {
    const t = shareTargets({ home: 9, peer: 1 }, budgets, 0.2);
    // 10 each (a fifth of 50), the other 30 nine to one.
    expect(t.home?.[MINUTE.key]).toBe(37);
    expect(t.peer?.[MINUTE.key]).toBe(13);
    expect(t.home?.[HOUR.key]).toBe(740);
    expect(t.peer?.[HOUR.key]).toBe(260);
  });

  it('gives a Region without demand nothing (active/passive: the active Region holds the whole budget)', () => {
    const t = shareTargets({ home: 3, peer: 0 }, budgets, 0.1);
    expect(t.home).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
    expect(t.peer).toEqual({ [MINUTE.key]: 0, [HOUR.key]: 0 });
  });

  it('keeps the previous targets while demand moves less than the hysteresis', () => {
    const previous = shareTargets({ home: 1, peer: 1 }, budgets, 0.1);
    expect(shareTargets({ home: 1.1, peer: 1 }, budgets, 0.1, { previous })).toEqual(previous);
    const moved = shareTargets({ home: 3, peer: 1 }, budgets, 0.1, { previous });
    expect(moved.home?.[MINUTE.key]).toBeGreaterThan(previous.home?.[MINUTE.key] ?? 0);
  });

  it('moves at once when a Region with no share gets demand, however small', () => {
    const previous = shareTargets({ home: 1, peer: 0 }, budgets, 0.02);
    const t = shareTargets({ home: 1, peer: 0.01 }, budgets, 0.02, { previous });
    expect(t.peer?.[MINUTE.key]).toBeGreaterThan(0);
  });

  it('with no demand anywhere: the previous targets, else an even split', () => {
    const previous = shareTargets({ home: 1, peer: 0 }, budgets, 0.1);
    expect(shareTargets({ home: 0, peer: 0 }, budgets, 0.1, { previous })).toEqual(previous);
    expect(shareTargets({ home: 0, peer: 0 }, budgets, 0.1).peer?.[MINUTE.key]).toBe(25);
  });
});

describe('shareTargets on what each Region uses', () => {
  it('splits only the free part by demand, on top of each Region’s use, adding up to the limit', () => {
    const used = { home: { [MINUTE.key]: 10 }, peer: { [MINUTE.key]: 30 } };
    const t = shareTargets({ home: 3, peer: 1 }, [MINUTE], 0, { used });
    // 10 free: 7.5 and 2.5, the odd unit to the larger remainder (home, first in order on a tie).
    expect(t.home?.[MINUTE.key]).toBe(18);
    expect(t.peer?.[MINUTE.key]).toBe(32);
  });

  it('a Region without demand keeps what it uses and gets nothing of what is free', () => {
    const used = { home: { [MINUTE.key]: 5 }, peer: { [MINUTE.key]: 20 } };
    const t = shareTargets({ home: 1, peer: 0 }, [MINUTE], 0.1, { used });
    expect(t).toEqual({ home: { [MINUTE.key]: 30 }, peer: { [MINUTE.key]: 20 } });
  });
});

describe('planRenewal: the renew and adopt order', () => {
  const base = { region: 'home', demand: 1, budgets: [MINUTE, HOUR], now: T0, targetFloor: 0.1 };

  it('a lower share is adopted before the write; the rings not lowered stay as they are meanwhile', () => {
    const plan = planRenewal({
      ...base,
      current: { [MINUTE.key]: 50, [HOUR.key]: 100 },
      other: { ...record({ minute: 25, hour: 500 }), demand: 1 },
    });
    expect(plan.shares[MINUTE.key]).toBe(25);
    expect(plan.adoptBefore).toEqual({ [MINUTE.key]: 25, [HOUR.key]: 100 });
    expect(plan.leaseUntil).toBe(T0 + LEASE_MS);
    expect(plan.fenceAt).toBe(T0 + LEASE_MS - CLOCK_BOUND_MS);
  });

  it('a higher share is only written: adopted once the write is acknowledged', () => {
    const plan = planRenewal({ ...base, current: { [MINUTE.key]: 0, [HOUR.key]: 0 }, other: undefined });
    expect(plan.shares).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
    expect(plan.adoptBefore).toBeUndefined();
  });

  it('never takes more than the limit minus the other Region’s claim, whatever the target', () => {
    const plan = planRenewal({
      ...base,
      current: { [MINUTE.key]: 0, [HOUR.key]: 0 },
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
      current: { [MINUTE.key]: 30, [HOUR.key]: 30 },
      other: { ...record({ minute: 10, hour: 10 }, { minute: 10, hour: 10 }), demand: 1 },
    });
    // 50 - 30 used - 10 claimed = 10 free, half each (equal demand, floor 10 % = 5 each).
    expect(plan.shares[MINUTE.key]).toBe(35);
    expect(plan.adoptBefore).toBeUndefined();
  });

  it('a lapsed Region’s last demand is not demand: the survivor targets the whole budget', () => {
    const lapsed = { ...record({ minute: 25, hour: 500 }), demand: 5 };
    const now = lapsed.leaseUntil + CLOCK_BOUND_MS + HOUR.spanMs;
    const plan = planRenewal({ ...base, now, current: { [MINUTE.key]: 25, [HOUR.key]: 500 }, other: lapsed });
    expect(plan.shares).toEqual({ [MINUTE.key]: 50, [HOUR.key]: 1000 });
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
