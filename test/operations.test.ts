import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { emptyState, type LedgerState, stateAt } from '../shared/ledger/ledger-state.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import {
  adoptShare,
  countDenied,
  type GrantInput,
  giveBack,
  grant,
  learn,
  NO_PENDING_ASKS,
  vendorReport,
} from '../shared/ledger/operations/index.js';
import { callerTag, newSecret, parseReceipt, receiptTtlMs } from '../shared/ledger/receipts.js';

/**
 * The ledger's operations (shared/ledger/operations/) on an in-memory item: no database, no clock but the ledger
 * time each call is handed. Each takes a working copy of the state (as the write loop hands every attempt one).
 */
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const limits = rateLimitSettingsSchema.parse({});
const plan = planFor(limits);
const at = (g: number) => ({ g, now: g });

function item(): LedgerState {
  const state = stateAt(emptyState(), T0, plan.marginMs);
  state.secret = newSecret();
  return state;
}

const ask = (count: number, extra: Partial<GrantInput> = {}): GrantInput => ({
  plan,
  version: 0,
  learning: false,
  refreshed: false,
  key: 'token',
  count,
  cls: undefined,
  consumer: undefined,
  maxCount: 50,
  caller: callerTag('caller'),
  regional: false,
  spreadMs: 0,
  random: () => 0,
  ...extra,
});

describe('operations (shared/ledger/operations/), on an in-memory item', () => {
  it('grant: grants up to the limit in a span (a grant change), then denies QUOTA with the wait, changing nothing', () => {
    const state = item();
    const first = grant(state, ask(50), at(T0));
    // Told, not diffed (I6): the grants it added, per ring (the 60 s and the hour's general rings here).
    expect(first.change).toEqual({ grants: new Map(plan.general.map((spec) => [spec.key, 50])) });
    expect(first.outcome).toMatchObject({
      kind: 'decided',
      decision: { granted: true, count: 50, available: 0 },
    });
    const denied = grant(state, ask(1), at(T0 + 1000));
    expect(denied.change).toBe('none');
    expect(denied.outcome).toMatchObject({ kind: 'decided', decision: { granted: false, reason: 'QUOTA' } });
    if (denied.outcome.kind !== 'decided' || denied.outcome.decision.granted) throw new Error('a denial');
    // The minute's grants leave the span a minute and the margin after they were made.
    expect(T0 + 1000 + denied.outcome.decision.retryAfterMs).toBeGreaterThanOrEqual(T0 + 60_000);
  });

  it('grant: a stale learned view is an outcome of its own (nothing written), and a refreshed view decides', () => {
    const state = item();
    state.learnedVersion = 3;
    const stale = grant(state, ask(1, { learning: true, version: 2 }), at(T0));
    expect(stale).toEqual({ change: 'none', outcome: { kind: 'stale-view' } });
    const refreshed = grant(state, ask(1, { learning: true, version: 2, refreshed: true }), at(T0));
    expect(refreshed.outcome).toMatchObject({ kind: 'decided', decision: { granted: true } });
  });

  it('give-back: returns a grant once; a spent, forged or expired receipt is refused, changing nothing', () => {
    const state = item();
    const granted = grant(state, ask(10), at(T0)).outcome;
    if (granted.kind !== 'decided' || !granted.decision.granted) throw new Error('a grant');
    const receipt = parseReceipt(granted.decision.receipt);
    if (!receipt) throw new Error('a receipt');
    const input = { plan, ...receipt, count: 4, ttlMs: receiptTtlMs(plan) };
    const back = giveBack(state, input, at(T0 + 500));
    expect(back).toEqual({ change: 'other', outcome: { kind: 'given-back', result: { returned: 4 } } });
    expect(giveBack(state, input, at(T0 + 600)).outcome).toMatchObject({ problem: 'SPENT' });
    // A mac one character off (never the character it has: the mac is random, and may start with either).
    const forged = `${input.mac.startsWith('x') ? 'y' : 'x'}${input.mac.slice(1)}`;
    expect(giveBack(state, { ...input, mac: forged }, at(T0 + 600)).outcome).toMatchObject({
      problem: 'FORGED',
    });
    expect(giveBack(item(), input, at(T0 + 600)).outcome).toMatchObject({ problem: 'FORGED' });
    const late = giveBack(state, input, at(T0 + receiptTtlMs(plan)));
    expect(late).toMatchObject({ change: 'none', outcome: { kind: 'receipt-refused', problem: 'EXPIRED' } });
  });

  it('vendor report and cap: a Retry-After holds every grant until it ends; the same report again changes nothing', () => {
    const state = item();
    const input = {
      plan,
      at: T0,
      feedback: { retryAfterSeconds: 30 },
      reporter: callerTag('a'),
      learning: { plan, version: 0 },
    };
    expect(vendorReport(state, input, at(T0))).toEqual({
      change: 'other',
      outcome: { kind: 'reported', tightened: true },
    });
    expect(vendorReport(state, input, at(T0 + 10))).toEqual({
      change: 'none',
      outcome: { kind: 'reported', tightened: false },
    });
    expect(grant(state, ask(1), at(T0 + 1000)).outcome).toMatchObject({
      decision: { granted: false, reason: 'COOLDOWN' },
    });
  });

  it('learning: a newer learned view stamps the item (its grants are from it on); an older one changes nothing', () => {
    const state = item();
    expect(learn(state, { plan, version: 2 }, T0)).toEqual({ seeded: false, newer: true });
    expect(state.learnedVersion).toBe(2);
    expect(learn(state, { plan, version: 1 }, T0)).toEqual({ seeded: false, newer: false });
    expect(state.learnedVersion).toBe(2);
  });

  it('share adoption: a Region share is adopted once (the same share again is unchanged) and holds the grants', () => {
    const state = item();
    const wanted = {
      limits: Object.fromEntries(plan.general.map((ring) => [ring.key, 5])),
      fenceAt: T0 + 60_000,
    };
    const adopted = adoptShare(state, { plan, wanted, mode: 'replace' }, at(T0));
    expect(adopted.change).toBe('other');
    expect(adopted.outcome.adoption.outcome).toBe('adopted');
    expect(adoptShare(state, { plan, wanted, mode: 'replace' }, at(T0)).change).toBe('none');
    expect(grant(state, ask(6), at(T0)).outcome).toMatchObject({ decision: { granted: false } });
    expect(grant(state, ask(5), at(T0)).outcome).toMatchObject({ decision: { granted: true } });
  });

  it('denied-ask count: at most one write a second per key, carrying every ask denied since', () => {
    const first = countDenied(NO_PENDING_ASKS, 2, T0);
    expect(first.write).toBe(2);
    const held = countDenied(first.pending, 3, T0 + 500);
    expect(held.write).toBeUndefined();
    expect(countDenied(held.pending, 1, T0 + 1000).write).toBe(4);
  });
});
