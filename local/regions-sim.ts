import type { RateLimitSettings } from '../shared/config/rate-limits.js';
import { planFor, type RingSpec } from '../shared/ledger/limit-plan.js';
import {
  type Budget,
  CLOCK_BOUND_MS,
  claimDropsAt,
  claimOf,
  type LeaseRecord,
  leaseHolds,
  planRenewal,
  RENEW_MS,
} from '../shared/regions/lease.js';
import { leaseStoreDouble } from './lease-store-double.js';
import { RegionalLedgerModel } from './regional-ledger-model.js';
import { checkVendorWindows, type VendorCheck } from './vendor-window-check.js';

/**
 * Two Regions, one vendor budget, in SIMULATED time (deterministic for a given `random`): each Region a regional
 * ledger (regional-ledger-model.ts: the real ledger's rings held to the adopted share and fence) and a renewer
 * that renews its lease record in one lease item (lease-store-double.ts: strongly consistent, conditional on a
 * version, with failed calls, lost answers of applied writes, latency and partitions) every RENEW_MS, as
 * shared/regions/lease.ts says; clocks skewed up to the bound; Regions lost (and back); demand per Region as a
 * function of time. The vendor's side (vendor-window-check.ts) sees every granted request at the moment it is
 * sent (within its permit's validity). The tests and `npm run bench -- regions` both run it.
 */
export const REGIONS = ['home', 'peer'] as const;
export type Region = (typeof REGIONS)[number];

/**
 * `lease`: the rules of shared/regions/lease.ts. The two CONTROLS, which the vendor check must catch:
 * `full-budget`: each Region's ledger holds the whole budget (two independent brokers); `share-only`: a renewer
 * counts only the other Region's current share as its claim (a shrunk share is free at once).
 */
export type ClaimRule = 'lease' | 'full-budget' | 'share-only';

export interface RegionPlan {
  /** This Region's clock minus real time (ms); two Regions' offsets differ by at most the clock bound. */
  clockOffsetMs: number;
  /** Lost (no grants, no renewals) from this moment (ms after the start)... */
  lostAt?: number;
  /** ...until this one, if ever: its ledger item kept its rings, its fence has passed. */
  backAt?: number;
  /** Its lease-store calls fail in these intervals (ms after the start); it keeps serving its own demand. */
  partitions?: readonly { from: number; to: number }[];
}

export interface RegionsSimOptions {
  random: () => number;
  durationMs: number;
  /** Asks per second of each Region's services at `t` (ms after the start). */
  demand: (region: Region, t: number) => number;
  regions: Record<Region, RegionPlan>;
  /** Default: the vendor's general limits (50 per 60 s, 1000 per 3600 s), margin 3 s, validity 2 s. */
  limits: RateLimitSettings;
  /** A lease-store call fails with this probability; an applied write loses its answer with `lostAnswer`. */
  store?: { failure?: number; lostAnswer?: number; latencyMs?: readonly [number, number] };
  claimRule?: ClaimRule;
  /** shareTargets' floor: the least share of a Region with demand (a share of the limit). */
  targetFloor?: number;
  /** How targets are set: `free` (default) splits the free part of each budget, `fractions` the limit. */
  targets?: 'free' | 'fractions';
  /** A lost Region's services move their asks to the other Region (true by default). */
  failover?: boolean;
}

export interface Ask {
  /** Real time (ms after the start). */
  t: number;
  region: Region;
  /** When the request would be sent after a grant: within the permit's validity. */
  sendDelayMs: number;
}

export interface Adoption {
  t: number;
  region: Region;
  shares: Record<string, number>;
  fenceAt: number;
}

export interface RegionsSimResult {
  asks: number;
  served: Record<Region, number>;
  /** Real send times of every served request. */
  sendTimes: number[];
  /** Real grant times, by Region. */
  grantTimes: Record<Region, number[]>;
  vendor: VendorCheck;
  storeWrites: Record<Region, number>;
  storeReads: Record<Region, number>;
  /** Lease-store calls made while a grant was being decided: the grant path makes none. */
  storeCallsOnGrantPath: number;
  /** Grants a Region made at or after the fence of its latest record in the store (beyond floor 0). */
  grantsPastFence: number;
  /** Asks a Region had at or after that fence (what the previous figure could have been). */
  asksPastFence: number;
  adoptions: Adoption[];
  /** Every record as it was written, by real time of the write. */
  written: { t: number; record: LeaseRecord }[];
  budgets: Budget[];
  specs: RingSpec[];
}

const RETRY_MS: readonly [number, number] = [500, 2000];

/** The asks of a run, fixed before any decision (open loop), so a single ledger can serve the very same ones. */
export function generateAsks(options: RegionsSimOptions): Ask[] {
  const { random, durationMs } = options;
  const validityMs = options.limits.permitValiditySeconds * 1000;
  const asks: Ask[] = [];
  const stepMs = 1000;
  for (let t = 0; t < durationMs; t += stepMs) {
    for (const region of REGIONS) {
      const count = poisson(random, (options.demand(region, t) * stepMs) / 1000);
      for (let i = 0; i < count; i++) {
        const at = t + random() * stepMs;
        asks.push({ t: at, region: routeOf(options, region, at), sendDelayMs: random() * validityMs });
      }
    }
  }
  return asks.sort((a, b) => a.t - b.t);
}

const isDown = (plan: RegionPlan, t: number): boolean =>
  plan.lostAt !== undefined && t >= plan.lostAt && (plan.backAt === undefined || t < plan.backAt);

function routeOf(options: RegionsSimOptions, region: Region, t: number): Region {
  if (options.failover === false || !isDown(options.regions[region], t)) return region;
  const other = otherOf(region);
  return isDown(options.regions[other], t) ? region : other;
}

export const otherOf = (region: Region): Region => (region === 'home' ? 'peer' : 'home');

function poisson(random: () => number, mean: number): number {
  if (mean <= 0) return 0;
  const limit = Math.exp(-mean);
  let count = 0;
  let product = random();
  while (product > limit) {
    count++;
    product *= random();
  }
  return count;
}

export const budgetsOf = (specs: readonly RingSpec[]): Budget[] =>
  specs.map((s) => ({ key: s.key, limit: s.limit, windowMs: s.windowMs, spanMs: s.spanMs }));

/** The same asks served by ONE ledger holding the whole budget: what a single-Region broker would serve. */
export function singleLedgerServed(asks: readonly Ask[], limits: RateLimitSettings): number[] {
  const ledger = new RegionalLedgerModel(planFor(limits).general);
  ledger.adoptShare(
    Object.fromEntries(planFor(limits).general.map((s) => [s.key, s.limit])),
    Number.POSITIVE_INFINITY,
  );
  return asks.filter((ask) => ledger.grant(ask.t)).map((ask) => ask.t + ask.sendDelayMs);
}

interface Event {
  t: number;
  run: () => void;
}

/** Events in time order; those at one time in the order they were scheduled. */
class Agenda {
  #events: Event[] = [];

  at(t: number, run: () => void): void {
    let lo = 0;
    let hi = this.#events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#events[mid] as Event).t <= t) lo = mid + 1;
      else hi = mid;
    }
    this.#events.splice(lo, 0, { t, run });
  }

  /** Runs every event due by `t` (events may schedule more). */
  runUntil(t: number): void {
    while (this.#events.length > 0 && (this.#events[0] as Event).t <= t) this.#events.shift()?.run();
  }
}

export function simulateRegions(options: RegionsSimOptions, asks = generateAsks(options)): RegionsSimResult {
  const { random } = options;
  const rule = options.claimRule ?? 'lease';
  const specs = planFor(options.limits).general;
  const budgets = budgetsOf(specs);
  const store = leaseStoreDouble();
  const agenda = new Agenda();
  const latency = options.store?.latencyMs ?? [20, 200];
  const lag = () => latency[0] + random() * (latency[1] - latency[0]);
  const clock = (region: Region, t: number) => t + options.regions[region].clockOffsetMs;
  const partitioned = (region: Region, t: number) =>
    (options.regions[region].partitions ?? []).some((p) => t >= p.from && t < p.to);
  const callFails = (region: Region, t: number) =>
    isDown(options.regions[region], t) || partitioned(region, t) || random() < (options.store?.failure ?? 0);

  const ledgers = {
    home: new RegionalLedgerModel(specs),
    peer: new RegionalLedgerModel(specs),
  } satisfies Record<Region, RegionalLedgerModel>;
  const result: RegionsSimResult = {
    asks: asks.length,
    served: { home: 0, peer: 0 },
    sendTimes: [],
    grantTimes: { home: [], peer: [] },
    vendor: { rejected: 0, mostInAnySpan: [] },
    storeWrites: { home: 0, peer: 0 },
    storeReads: { home: 0, peer: 0 },
    storeCallsOnGrantPath: 0,
    grantsPastFence: 0,
    asksPastFence: 0,
    adoptions: [],
    written: [],
    budgets,
    specs,
  };
  const adopt = (region: Region, t: number, shares: Record<string, number>, fence: number) => {
    ledgers[region].adoptShare(shares, fence);
    result.adoptions.push({ t, region, shares: { ...shares }, fenceAt: fence });
  };

  // Demand as a renewer measures it: its own asks of the last minute, per second.
  const recentAsks: Record<Region, number[]> = { home: [], peer: [] };
  const demandOf = (region: Region, t: number) => {
    const list = recentAsks[region];
    while (list.length > 0 && (list[0] as number) < t - 60_000) list.shift();
    return list.length / 60;
  };
  const previousTargets: Partial<Record<Region, Record<string, Record<string, number>>>> = {};

  const claim = (other: LeaseRecord | undefined, budget: Budget, now: number) => {
    if (rule === 'share-only')
      return other && leaseHolds(other, now) ? Math.min(budget.limit, other.shares[budget.key] ?? 0) : 0;
    return claimOf(other, budget, now);
  };

  const renew = (region: Region, t: number) => {
    const plan = options.regions[region];
    if (isDown(plan, t)) {
      if (plan.backAt !== undefined && plan.backAt > t)
        agenda.at(plan.backAt, () => renew(region, plan.backAt as number));
      return;
    }
    const retry = (at: number) =>
      agenda.at(at + RETRY_MS[0] + random() * (RETRY_MS[1] - RETRY_MS[0]), () => renew(region, at));
    result.storeReads[region]++;
    const readAt = t + lag();
    agenda.at(readAt, () => {
      if (callFails(region, readAt)) return retry(readAt);
      const item = store.read();
      const now = clock(region, readAt);
      const other = item.records[otherOf(region)];
      const renewal = planRenewal({
        region,
        current: ledgers[region].shares,
        demand: demandOf(region, readAt),
        other,
        budgets,
        now,
        targetFloor: options.targetFloor ?? 0.05,
        ...(previousTargets[region] ? { previousTargets: previousTargets[region] } : {}),
        ...(options.targets === 'fractions' ? {} : { ownSnapshot: ledgers[region].snapshot(now) }),
        claim,
      });
      previousTargets[region] = renewal.targets;
      if (renewal.adoptBefore) adopt(region, readAt, renewal.adoptBefore, ledgers[region].fenceAt);
      const record: LeaseRecord = {
        region,
        renewedAt: renewal.renewedAt,
        leaseUntil: renewal.leaseUntil,
        shares: renewal.shares,
        snapshot: ledgers[region].snapshot(now),
        demand: demandOf(region, readAt),
      };
      result.storeWrites[region]++;
      const writeAt = readAt + lag();
      agenda.at(writeAt, () => {
        if (callFails(region, writeAt)) return retry(writeAt);
        if (!store.write(region, item.version, record)) return renew(region, writeAt);
        result.written.push({ t: writeAt, record });
        if (random() < (options.store?.lostAnswer ?? 0)) return retry(writeAt);
        const answerAt = writeAt + lag() / 2;
        agenda.at(answerAt, () => {
          if (isDown(plan, answerAt)) return renew(region, answerAt);
          adopt(region, answerAt, renewal.shares, renewal.fenceAt);
          // Next: the regular renewal, or sooner where the other's claim drops (a lost Region's tail ends).
          // (A drop that came while this renewal was under way: at once.)
          const drops = claimDropsAt(other, budgets, now).map((own) => own - plan.clockOffsetMs + 1);
          const next = Math.max(answerAt, Math.min(readAt + RENEW_MS, ...drops.filter((d) => d > readAt)));
          agenda.at(next, () => renew(region, next));
        });
      });
    });
  };

  if (rule === 'full-budget') {
    for (const region of REGIONS)
      adopt(region, 0, Object.fromEntries(specs.map((s) => [s.key, s.limit])), Number.POSITIVE_INFINITY);
  } else {
    for (const region of REGIONS) {
      const first = random() * RENEW_MS;
      agenda.at(first, () => renew(region, first));
    }
  }

  for (const ask of asks) {
    agenda.runUntil(ask.t);
    if (isDown(options.regions[ask.region], ask.t)) continue;
    recentAsks[ask.region].push(ask.t);
    const now = clock(ask.region, ask.t);
    const latest = store.latest(ask.region);
    const pastFence = rule !== 'full-budget' && (!latest || now >= latest.leaseUntil - CLOCK_BOUND_MS);
    if (pastFence) result.asksPastFence++;
    const callsBefore = store.calls;
    const granted = ledgers[ask.region].grant(now);
    result.storeCallsOnGrantPath += store.calls - callsBefore;
    if (!granted) continue;
    if (pastFence) result.grantsPastFence++;
    result.served[ask.region]++;
    result.grantTimes[ask.region].push(ask.t);
    result.sendTimes.push(ask.t + ask.sendDelayMs);
  }
  result.vendor = checkVendorWindows(
    result.sendTimes,
    specs.map((s) => ({ limit: s.limit, windowMs: s.windowMs })),
  );
  return result;
}
