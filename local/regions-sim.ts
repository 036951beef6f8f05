import type { RateLimit, RateLimitSettings } from '../shared/config/rate-limits.js';
import type { LearnedLimit } from '../shared/ledger/learned-limits.js';
import { planIn } from '../shared/ledger/learned-reports.js';
import { LEARNED_CACHE_MS } from '../shared/ledger/learned-store.js';
import { ClockReference, DATE_LAG_MS, LedgerClock } from '../shared/ledger/ledger-clock.js';
import { GENERAL_SCOPE, type LimitPlan, planFor, type RingSpec } from '../shared/ledger/limit-plan.js';
import type { RegionShare } from '../shared/ledger/region-share.js';
import {
  type Budget,
  CLOCK_BOUND_MS,
  claimDropsAt,
  claimOf,
  demandOf,
  type LeaseRecord,
  leaseHolds,
  POLL_MS,
  planRenewal,
  RENEW_MS,
  renewsEarly,
  TARGET_FLOOR,
} from '../shared/regions/lease.js';
import { CLOCK_PROBE_MS, leasedBudgets } from '../shared/regions/renewer.js';
import {
  RENEWER_CLOCK_TOLERANCE_MS,
  type RenewalRefusal,
  renewerCheck,
} from '../shared/regions/renewer-clock.js';
import type { Telemetry } from '../shared/telemetry.js';
import { fractionTargets } from './fraction-targets.js';
import { leaseStoreDouble } from './lease-store-double.js';
import { RegionalLedgerModel } from './regional-ledger-model.js';
import { checkVendorWindows, type VendorCheck } from './vendor-window-check.js';

/**
 * Two Regions, one vendor budget, in SIMULATED time (deterministic for a given `random`): each Region a regional
 * ledger (regional-ledger-model.ts: the real ledger's rings held to the adopted share and fence, adopted by the
 * real ledger's rule) and one or more renewer processes (overlapping runs of its renewer) that poll the lease item
 * every POLL_MS and renew it every RENEW_MS or early, as shared/regions/lease.ts and renewer.ts say, through one
 * lease item (lease-store-double.ts: strongly consistent, conditional on a version, with failed calls, lost
 * answers of applied writes, latency and partitions). Every call of a renewer (the lease item's read and write,
 * its ledger's read, cap and adoption) takes its own latency and, at random, a stall before it. Each Region's
 * DynamoDB clock is apart from the other's; each renewer process has a clock of its own, corrected to its
 * Region's DynamoDB clock from the `Date` of its calls' answers by the real estimator (ledger-clock.ts,
 * renewer-clock.ts), refused where it cannot be; Regions lost (and back); demand per Region as a function of time.
 * A learned class (docs/class-limits.md) may be asked for in both Regions: held to the probe until a report teaches
 * its vendor limits at a given moment, then to the rings the real ledger makes of them (learned-reports.ts planIn),
 * one view for both Regions (the MRSC table's `learned#` item, docs/multi-region.md "Learned limits") that each
 * process sees within its cache (LEARNED_CACHE_MS); every renewer leases the rings of the view it sees
 * (renewer.ts leasedBudgets), each Region's ledger decides a class's ask by the real ledger's rule on its view held
 * to its share, and the report seeds the learned rings in the reporting Region's ledger (seedLearnedRing).
 * The vendor's side (vendor-window-check.ts) sees every granted request at the moment it is sent (within its
 * permit's validity), and the class's own requests against the class's limits. The tests and
 * `npm run bench -- regions` both run it.
 */
export const REGIONS = ['home', 'peer'] as const;
export type Region = (typeof REGIONS)[number];

/**
 * `lease`: the rules of shared/regions/lease.ts. The two CONTROLS, which the vendor check must catch:
 * `full-budget`: each Region's ledger holds the whole budget (two independent brokers); `share-only`: a renewer
 * counts only the other Region's current share as its claim (a shrunk share is free at once).
 */
export type ClaimRule = 'lease' | 'full-budget' | 'share-only';

/**
 * A learned class in both Regions: configured `[]` (`limits.classes[name]`), its vendor limits not told to the
 * broker until a report teaches them (all at once, kept: as corroborated, T4) at `knownAt`.
 */
export interface LearnedClassPlan {
  name: string;
  /** The vendor's limits of the class (1 to 3 windows): what the report teaches, and what the vendor checks. */
  limits: readonly RateLimit[];
  /** Each ask of a Region's services is of the class with this probability (drawn when the asks are). */
  part: number;
  /** Real time (ms after the start) at which the report reaches `learner`'s ledger; undefined: never. */
  knownAt?: number;
  /** The Region whose vend function takes the report (the other one if it is lost then). */
  learner: Region;
  /** The vendor answered the request the report copies this long before `knownAt`: its count is of then. */
  answerLagMs: number;
}

/**
 * `leased` (default): the learned class's rings leased like any budget, the report seeding its Region's rings and
 * its count kept on the learned item, from which the other Region's ledger seeds its own (ledger-state.ts
 * seedFromLearned). `whole`, a CONTROL: each Region's ledger holds the class's rings to their whole limit (the
 * class not leased). `unseeded`, a CONTROL: leased, but the learned item keeps no count (the rule before: the other
 * Region's learned rings start with its own grants alone, the first learning's gap).
 */
export type LearnedRule = 'leased' | 'whole' | 'unseeded';

/** One renewer process of a Region: a run of its renewer (two at once when a run overlaps the next). */
export interface RenewerProcessPlan {
  /**
   * Its container's clock minus its Region's DynamoDB clock (ms): any value. Within MAX_LEDGER_CLOCK_SKEW_MS it is
   * corrected (renewer-clock.ts); beyond, the process refuses every renewal.
   */
  clockOffsetMs: number;
}

export interface RegionPlan {
  /**
   * This Region's DynamoDB clock minus real time (ms): its ledger's time (the vend processes', corrected to it) and
   * what its renewers correct to. Two Regions' differ by at most the part of the clock bound the renewers leave
   * (renewer-clock.ts, RENEWER_CLOCK_SHARE).
   */
  clockOffsetMs: number;
  /** Its renewer processes; one, on its DynamoDB clock, unless set. */
  renewers?: readonly RenewerProcessPlan[];
  /** Lost (no grants, no renewals) from this moment (ms after the start)... */
  lostAt?: number;
  /** ...until this one, if ever: its ledger item kept its rings, its fence has passed, its renewers start afresh. */
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
  /** Before each call of a renewer, with this probability, a pause of up to `maxMs` (a slow run). */
  stalls?: { probability: number; maxMs: number };
  claimRule?: ClaimRule;
  /**
   * `versioned` (default): adoptions stamped with the lease item's version (issue 33). `fence-only`: a CONTROL,
   * the rule that landed before it (no version: an adoption compares fences only), which overlapping runs break.
   */
  adoption?: 'versioned' | 'fence-only';
  /**
   * `corrected` (default): a renewer decides on its Region's DynamoDB clock as it measures it (renewer-clock.ts).
   * `raw`: a CONTROL, the renewer that landed before issue 33, on its container's own clock.
   */
  renewerClock?: 'corrected' | 'raw';
  /** Renew early where a poll finds the plan moved (lease.ts renewsEarly); default true. False: every RENEW_MS. */
  early?: boolean;
  /** shareTargets' floor: the least share of a Region with demand (a share of the limit). */
  targetFloor?: number;
  /**
   * How targets are set: `free` (default, the renewer's: shareTargets) splits the free part of each budget,
   * `fractions` the limit (fraction-targets.ts, the alternative docs/multi-region.md compares).
   */
  targets?: 'free' | 'fractions';
  /** A lost Region's services move their asks to the other Region (true by default). */
  failover?: boolean;
  /** A learned class asked for in both Regions (`limits.classes[name]` must be `[]`). */
  learned?: LearnedClassPlan;
  learnedRule?: LearnedRule;
}

export interface Ask {
  /** Real time (ms after the start). */
  t: number;
  region: Region;
  /** When the request would be sent after a grant: within the permit's validity. */
  sendDelayMs: number;
  /** The learned class it is of, if any. */
  cls?: string;
}

export interface Adoption {
  t: number;
  region: Region;
  /** The share the ledger holds afterwards (a cap may leave some rings above what it was asked). */
  shares: Record<string, number>;
  fenceAt: number;
  mode: 'cap' | 'replace';
  /** Real time of the decision it carries out (the renewal's plan); `t` for the controls' full budget. */
  plannedAt: number;
}

/** What one renewer process did. */
export interface RenewerFigures {
  region: Region;
  /** Its clock minus its Region's DynamoDB clock. */
  clockOffsetMs: number;
  /** Lease-record writes it sent, and adoptions (caps and replaces) it made that changed its ledger. */
  writes: number;
  adoptions: number;
  /** Renewals it refused, by reason (renewer-clock.ts). */
  refusals: Partial<Record<RenewalRefusal, number>>;
  /** Its adoptions the ledger refused as older than the share held (a newer run had capped or adopted). */
  stale: number;
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
  /**
   * Moments (after each adoption and each lease write) at which a Region's ledger, not yet fenced, held some ring to
   * more than its latest record in the item says, or fenced later than it: what step 2 of the proof rules out
   * (docs/multi-region.md), whether or not a grant or the other Region's read met it.
   */
  aboveRecord: number;
  adoptions: Adoption[];
  /** Every record as it was written, by real time of the write. */
  written: { t: number; record: LeaseRecord }[];
  renewers: RenewerFigures[];
  budgets: Budget[];
  specs: RingSpec[];
  /** Real send times of the learned class's requests (also in sendTimes), and its asks. */
  classSendTimes: number[];
  classAsks: number;
  /** The class's grants by Region once every process plans on the learned view (see classVendorSettled). */
  classSettled: Record<Region, number>;
  /** The vendor's check of the class's requests against the class's own limits (LearnedClassPlan.limits). */
  classVendor: VendorCheck;
  /**
   * The same, of the class's requests granted once every process of both Regions plans on the learned view (its
   * cache, LEARNED_CACHE_MS, after the report): every span of those requests alone.
   */
  classVendorSettled: VendorCheck;
  /** Real time at which the report reached a ledger (undefined: never learned in the run). */
  learnedAt?: number;
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
        const cls = options.learned && random() < options.learned.part ? options.learned.name : undefined;
        asks.push({
          t: at,
          region: routeOf(options, region, at),
          sendDelayMs: random() * validityMs,
          ...(cls === undefined ? {} : { cls }),
        });
      }
    }
  }
  return asks.sort((a, b) => a.t - b.t);
}

const isDown = (plan: RegionPlan, t: number): boolean =>
  plan.lostAt !== undefined && t >= plan.lostAt && (plan.backAt === undefined || t < plan.backAt);
/** 0 until the Region is back after a loss, then 1. */
const lifeOf = (plan: RegionPlan, t: number): number =>
  plan.backAt !== undefined && t >= plan.backAt ? 1 : 0;

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
  return singleLedger(asks, limits).sendTimes;
}

/**
 * The same asks served by ONE ledger holding the whole budget, a learned class's too (learned at `knownAt` on its
 * one view, no delay, its rings seeded as the Regions' learner seeds them): send times, all and the class's.
 */
export function singleLedger(
  asks: readonly Ask[],
  limits: RateLimitSettings,
  learned?: LearnedClassPlan,
): { sendTimes: number[]; classSendTimes: number[] } {
  const base = planFor(limits);
  const taughtPlan = learned ? learnedPlanOf(limits, base, learned, learned.knownAt ?? 0) : undefined;
  const ledger = new RegionalLedgerModel(base.general);
  ledger.adoptShare(fullShares([base, taughtPlan?.plan]), Number.POSITIVE_INFINITY);
  const sendTimes: number[] = [];
  const classSendTimes: number[] = [];
  let taught = false;
  for (const ask of asks) {
    if (learned?.knownAt !== undefined && taughtPlan && !taught && ask.t >= learned.knownAt) {
      taught = true;
      seedAll(
        ledger,
        learned.knownAt,
        taughtPlan,
        learned,
        classSendTimes,
        learned.knownAt - learned.answerLagMs,
      );
    }
    const granted =
      ask.cls === undefined
        ? ledger.grant(ask.t)
        : ledger.grantClass(ask.t, taught && taughtPlan ? taughtPlan.plan : base, ask.cls);
    if (!granted) continue;
    sendTimes.push(ask.t + ask.sendDelayMs);
    if (ask.cls !== undefined) classSendTimes.push(ask.t + ask.sendDelayMs);
  }
  return { sendTimes, classSendTimes };
}

/** Every ring of these plans at its whole limit: a ledger that holds the whole budget. */
const fullShares = (plans: readonly (LimitPlan | undefined)[]): Record<string, number> =>
  Object.fromEntries(plans.flatMap((plan) => (plan ? leasedBudgets(plan) : [])).map((b) => [b.key, b.limit]));

/**
 * The plan once the report taught the class: the real ledger's (learned-reports.ts planIn: learnedRingLimits of
 * the kept limits), at ledger time `at`; and the limits as the learned item keeps them.
 */
function learnedPlanOf(
  limits: RateLimitSettings,
  base: LimitPlan,
  learned: LearnedClassPlan,
  at: number,
): { plan: LimitPlan; taught: LearnedLimit[]; seeds: Map<string, { n: number; at: number; v: number }> } {
  const taught: LearnedLimit[] = learned.limits.map((l) => ({ ...l, learnedAt: at, by: 'sim' }));
  const view = { version: 1, classes: { [learned.name]: taught }, rises: {}, at };
  // The learned item's seeds (learned-store.ts `sd`), which seedAll writes as the report's write does.
  const seeds = new Map<string, { n: number; at: number; v: number }>();
  return { plan: { ...planIn(limits, base, view, at), seeds }, taught, seeds };
}

/**
 * The report reaching a ledger at ledger time g: each learned ring of the class seeded (shortest window first) with
 * what the vendor had counted in its window when it answered (`answeredAt`, real time), as a report of that limit
 * would say (`limit - remaining`); and that count kept on the learned item with the report's time (its seed, version
 * 1), from which the other Region's ledger seeds its rings when it first decides on the learned view (acquire).
 */
function seedAll(
  ledger: RegionalLedgerModel,
  g: number,
  learnedPlan: ReturnType<typeof learnedPlanOf>,
  learned: LearnedClassPlan,
  classSendTimes: readonly number[],
  answeredAt: number,
  keepSeed = true,
): void {
  const specs = [...(learnedPlan.plan.classes.get(learned.name) ?? [])].sort(
    (a, b) => a.windowMs - b.windowMs,
  );
  for (const spec of specs) {
    const counted = classSendTimes.filter((s) => s <= answeredAt && s >= answeredAt - spec.windowMs).length;
    if (keepSeed) learnedPlan.seeds.set(spec.key, { n: Math.min(spec.limit, counted), at: g, v: 1 });
    ledger.seedLearned(
      g,
      learnedPlan.plan,
      learned.name,
      spec.windowSeconds,
      Math.min(spec.limit, counted),
      learnedPlan.taught,
      1,
    );
  }
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

/** One renewer process as the simulation runs it: its own clock and estimate of DynamoDB's, its own memory. */
interface Process {
  region: Region;
  /** Its Region's lives it belongs to (a Region back after a loss runs new processes). */
  life: number;
  /** How long after the report its ledger's learned cache shows the learned view (up to LEARNED_CACHE_MS). */
  learnedDelayMs: number;
  plan: RenewerProcessPlan;
  figures: RenewerFigures;
  reference: ClockReference;
  ledgerClock: LedgerClock;
  /** With `targets: 'fractions'`: the targets of its last renewal (their hysteresis). */
  previousTargets?: Record<string, Record<string, number>>;
  /** Real time of its next regular renewal. */
  due: number;
}

const quiet: Telemetry = { debug() {}, info() {}, warn() {}, error() {}, metric() {} };
/** The regional ledger's DynamoDB answers within the Region (ms). */
const LEDGER_LATENCY_MS: readonly [number, number] = [3, 30];
/** Lost races in a row before a renewal gives up until its retry (shared/regions/renewer.ts). */
const MAX_CONFLICTS = 5;

export function simulateRegions(options: RegionsSimOptions, asks = generateAsks(options)): RegionsSimResult {
  const { random } = options;
  const rule = options.claimRule ?? 'lease';
  const versioned = (options.adoption ?? 'versioned') === 'versioned';
  const early = options.early ?? true;
  const raw = options.renewerClock === 'raw';
  const basePlan = planFor(options.limits);
  const specs = basePlan.general;
  const budgets = budgetsOf(specs);
  const learned = options.learned;
  const learnedRule = options.learnedRule ?? 'leased';
  const store = leaseStoreDouble();
  const agenda = new Agenda();
  const latency = options.store?.latencyMs ?? [20, 200];
  const between = (range: readonly [number, number]) => range[0] + random() * (range[1] - range[0]);
  const stall = () =>
    options.stalls && random() < options.stalls.probability ? random() * options.stalls.maxMs : 0;
  /** A Region's DynamoDB clock (its ledger's time) at real time t. */
  const clock = (region: Region, t: number) => t + options.regions[region].clockOffsetMs;
  const partitioned = (region: Region, t: number) =>
    (options.regions[region].partitions ?? []).some((p) => t >= p.from && t < p.to);

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
    aboveRecord: 0,
    adoptions: [],
    written: [],
    renewers: [],
    budgets,
    specs,
    classSendTimes: [],
    classAsks: 0,
    classSettled: { home: 0, peer: 0 },
    classVendor: { rejected: 0, mostInAnySpan: [] },
    classVendorSettled: { rejected: 0, mostInAnySpan: [] },
  };
  // The learned class: the plan once taught (at the learner's ledger time of the report), and which Regions'
  // ledgers plan on it (the learner's from the report on; the other's once one of its processes, each on its own
  // cache, granted on it: no grant on an older view after that, docs/class-limits.md rule 2).
  const knownAt = learned?.knownAt;
  const learner: Region | undefined =
    learned && knownAt !== undefined
      ? isDown(options.regions[learned.learner], knownAt)
        ? otherOf(learned.learner)
        : learned.learner
      : undefined;
  const taughtPlan =
    learned && knownAt !== undefined && learner
      ? learnedPlanOf(options.limits, basePlan, learned, clock(learner, knownAt))
      : undefined;
  const onLearnedView: Record<Region, boolean> = { home: false, peer: false };
  /** From then on every process of both Regions plans on the learned view (its cache shows it). */
  const settledAt = knownAt === undefined ? undefined : knownAt + LEARNED_CACHE_MS;
  const settledSends: number[] = [];
  /** The plan a renewer process reads at real time t: the learned one once its cache shows it. */
  const planOfProcess = (p: Process, t: number): LimitPlan =>
    taughtPlan && knownAt !== undefined && t >= knownAt + p.learnedDelayMs ? taughtPlan.plan : basePlan;
  /** The plan a vend process of the Region decides a class's ask on at real time t. */
  const planOfAsk = (region: Region, t: number): LimitPlan => {
    if (!taughtPlan || knownAt === undefined || t < knownAt) return basePlan;
    return onLearnedView[region] || t >= knownAt + random() * LEARNED_CACHE_MS ? taughtPlan.plan : basePlan;
  };
  /** `whole` (a control): each class ring of the plan at its whole limit in the Region's share, not leased. */
  const unleased = (plan: LimitPlan): Record<string, number> =>
    learnedRule === 'whole'
      ? Object.fromEntries(
          leasedBudgets(plan)
            .filter((b) => !b.key.startsWith(`${GENERAL_SCOPE}/`))
            .map((b) => [b.key, b.limit]),
        )
      : {};
  // The budgets a renewal leases on a plan, once per plan (the run has two).
  const leased = new Map<LimitPlan, Budget[]>();
  const leasedOf = (plan: LimitPlan): Budget[] => {
    let found = leased.get(plan);
    if (!found) {
      found =
        learnedRule === 'whole'
          ? leasedBudgets(plan).filter((b) => b.key.startsWith(`${GENERAL_SCOPE}/`))
          : leasedBudgets(plan);
      leased.set(plan, found);
    }
    return found;
  };
  /** Proof step 2 at real time t: the ledger holds at most what its Region's latest record says. */
  const checkRecord = (region: Region, t: number): void => {
    const held = ledgers[region].share;
    const latest = store.latest(region);
    if (!held || rule === 'full-budget' || clock(region, t) >= held.fenceAt) return;
    const above =
      !latest ||
      held.fenceAt > latest.leaseUntil - CLOCK_BOUND_MS ||
      Object.entries(held.limits).some(([key, limit]) => limit > (latest.shares[key] ?? 0));
    if (above) result.aboveRecord++;
  };
  const adopt = (
    p: Process | undefined,
    region: Region,
    t: number,
    share: RegionShare,
    mode: 'cap' | 'replace',
    plannedAt = t,
  ): void => {
    const adoption = ledgers[region].adoptShare(share.limits, share.fenceAt, {
      mode,
      ...(share.version === undefined ? {} : { version: share.version }),
    });
    if (adoption.outcome === 'stale' && p) p.figures.stale++;
    if (adoption.outcome !== 'adopted') return;
    checkRecord(region, t);
    if (p) p.figures.adoptions++;
    result.adoptions.push({
      t,
      region,
      shares: { ...ledgers[region].shares },
      fenceAt: adoption.share.fenceAt,
      mode,
      plannedAt,
    });
  };

  // Demand as a renewer measures it (lease.ts demandOf): its asks over RENEW_MS and each general window. Asks are
  // appended in time order and asked about at later and later times, so each window keeps where it starts.
  const windows = [RENEW_MS, ...specs.map((s) => s.windowMs)].sort((a, b) => a - b);
  const recentAsks: Record<Region, { times: number[]; starts: number[] }> = {
    home: { times: [], starts: windows.map(() => 0) },
    peer: { times: [], starts: windows.map(() => 0) },
  };
  const demandIn = (region: Region, t: number) => {
    const asked = recentAsks[region];
    const { times, starts } = asked;
    const counts = windows.map((windowMs, i) => {
      let start = starts[i] as number;
      while (start < times.length && (times[start] as number) < t - windowMs) start++;
      starts[i] = start;
      return { windowMs, count: times.length - start };
    });
    // What no window counts any more goes, now and then.
    const gone = Math.min(...starts);
    if (gone > 4096) {
      asked.times = times.slice(gone);
      asked.starts = starts.map((start) => start - gone);
    }
    return demandOf(counts);
  };

  const claim = (other: LeaseRecord | undefined, budget: Budget, now: number) => {
    if (rule === 'share-only')
      return other && leaseHolds(other, now) ? Math.min(budget.limit, other.shares[budget.key] ?? 0) : 0;
    return claimOf(other, budget, now);
  };

  // The current event's real time: what every process's own clock reads from.
  let simNow = 0;
  const newProcess = (
    region: Region,
    plan: RenewerProcessPlan,
    figures: RenewerFigures,
    due: number,
  ): Process => {
    const offset = options.regions[region].clockOffsetMs + plan.clockOffsetMs;
    const local = { now: () => simNow + offset, sleep: () => Promise.resolve() };
    const reference = new ClockReference();
    const ledgerClock = new LedgerClock({ local, reference, telemetry: quiet });
    return {
      region,
      life: lifeOf(options.regions[region], due),
      // Drawn only in runs with a learned class: the others draw as they did before there was one.
      learnedDelayMs: learned ? random() * LEARNED_CACHE_MS : 0,
      plan,
      figures,
      reference,
      ledgerClock,
      due,
    };
  };
  const localOf = (p: Process, t: number) =>
    t + options.regions[p.region].clockOffsetMs + p.plan.clockOffsetMs;

  /**
   * One DynamoDB call of a renewer at real time t: a stall maybe, then the request reaches the service at m, where
   * `apply` takes effect, and the answer comes back at r with its `Date` (DynamoDB's second at m, up to
   * DATE_LAG_MS late), which the process's estimate records. A lease-store call fails at random, and gets no
   * answer at all while the Region is cut off; `lost` (writes): applied, but the answer never comes back.
   */
  const call = <T>(
    p: Process,
    t: number,
    kind: 'lease' | 'ledger',
    apply: (m: number) => T,
    then: (value: T, r: number) => void,
    failed: (r: number) => void,
    lost = false,
  ): void => {
    const range = kind === 'lease' ? latency : LEDGER_LATENCY_MS;
    const sent = t + stall();
    const m = sent + between(range);
    const r = m + between(range);
    agenda.at(m, () => {
      const region = p.region;
      if (isDown(options.regions[region], m)) return;
      const noAnswer = kind === 'lease' && partitioned(region, m);
      const callFailed = !noAnswer && kind === 'lease' && random() < (options.store?.failure ?? 0);
      const applied = !noAnswer && !callFailed;
      const value = applied ? apply(m) : undefined;
      const stamp = clock(region, m) - random() * DATE_LAG_MS;
      agenda.at(r, () => {
        if (isDown(options.regions[region], r)) return;
        simNow = r;
        if (noAnswer || (lost && applied)) return failed(r);
        p.reference.record(localOf(p, sent), localOf(p, r), Math.floor(stamp / 1000) * 1000);
        if (!applied) return failed(r);
        then(value as T, r);
      });
    });
  };

  const retry = (p: Process, t: number) => {
    const at = t + between(RETRY_MS);
    agenda.at(at, () => poll(p, at));
  };

  /** A poll: the lease item, then the ledger's view, then a decision (renew, or read again later). */
  const poll = (p: Process, t: number): void => {
    const plan = options.regions[p.region];
    // A process of the Region's earlier life (its container went with the Region) does nothing more.
    if (p.life !== lifeOf(plan, t)) return;
    if (isDown(plan, t)) {
      if (plan.backAt !== undefined && plan.backAt > t) {
        const back = plan.backAt;
        // A new container: a fresh estimate of DynamoDB's clock, no memory of earlier renewals.
        agenda.at(back, () => {
          const fresh = newProcess(p.region, p.plan, p.figures, back);
          poll(fresh, back);
        });
      }
      return;
    }
    result.storeReads[p.region]++;
    call(
      p,
      t,
      'lease',
      () => store.read(),
      (item, r) => view(p, r, item, 0),
      (r) => retry(p, r),
    );
  };

  const view = (p: Process, t: number, item: ReturnType<typeof store.read>, conflicts: number): void => {
    const ledger = ledgers[p.region];
    // The set's plan as this process's ledger reads it (its learned view): the rings it snapshots and leases.
    const plan = planOfProcess(p, t);
    call(
      p,
      t,
      'ledger',
      (m) => ledger.snapshot(clock(p.region, m), plan),
      (snapshot, r) => decide(p, r, item, snapshot, conflicts, plan),
      (r) => retry(p, r),
    );
  };

  const decide = (
    p: Process,
    t: number,
    item: ReturnType<typeof store.read>,
    ownSnapshot: ReturnType<RegionalLedgerModel['snapshot']>,
    conflicts: number,
    plan: LimitPlan,
  ): void => {
    const { region } = p;
    simNow = t;
    const budgets = leasedOf(plan);
    const reading = raw ? { at: localOf(p, t) } : renewerCheck(p.ledgerClock, [plan]);
    if ('refusal' in reading) {
      p.figures.refusals[reading.refusal] = (p.figures.refusals[reading.refusal] ?? 0) + 1;
      const at = t + (reading.refusal === 'skew' ? RENEW_MS : CLOCK_PROBE_MS);
      agenda.at(at, () => poll(p, at));
      return;
    }
    const now = reading.at;
    const other = item.records[otherOf(region)];
    const demand = demandIn(region, t);
    const renewal = planRenewal({
      region,
      demand,
      other,
      budgets,
      now,
      targetFloor: options.targetFloor ?? TARGET_FLOOR,
      ownSnapshot,
      claim,
      ...(options.targets === 'fractions' ? { targets: fractionTargets(p.previousTargets) } : {}),
    });
    // Between regular renewals, a poll renews only where the plan moved enough (once decided, a lost race plans
    // again and writes).
    const betweenRenewals = conflicts === 0 && t < p.due;
    if (
      betweenRenewals &&
      !(early && renewsEarly({ region, plan: renewal, own: item.records[region], other, demand, budgets }))
    ) {
      const at = early ? Math.min(p.due, t + POLL_MS) : p.due;
      agenda.at(at, () => poll(p, at));
      return;
    }
    const version = versioned ? item.version + 1 : undefined;
    const stamped = (share: RegionShare): RegionShare =>
      version === undefined ? share : { ...share, version };
    call(
      p,
      t,
      'ledger',
      (m) => {
        adopt(
          p,
          region,
          m,
          stamped({ limits: { ...renewal.shares, ...unleased(plan) }, fenceAt: renewal.fenceAt }),
          'cap',
          t,
        );
        return ledgers[region].snapshot(clock(region, m), plan);
      },
      (snapshot, r) => {
        const record: LeaseRecord = {
          region,
          renewedAt: renewal.renewedAt,
          leaseUntil: renewal.leaseUntil,
          shares: renewal.shares,
          snapshot,
          demand,
        };
        result.storeWrites[region]++;
        p.figures.writes++;
        const lost = random() < (options.store?.lostAnswer ?? 0);
        call(
          p,
          r,
          'lease',
          (m) => {
            const ok = store.write(region, item.version, record);
            if (ok) {
              result.written.push({ t: m, record });
              checkRecord(region, m);
            }
            return { ok, current: store.read() };
          },
          (written, r2) => {
            if (!written.ok) {
              if (conflicts + 1 > MAX_CONFLICTS) return retry(p, r2);
              return view(p, r2, written.current, conflicts + 1);
            }
            p.previousTargets = renewal.targets;
            call(
              p,
              r2,
              'ledger',
              (m) =>
                adopt(
                  p,
                  region,
                  m,
                  stamped({ limits: { ...renewal.shares, ...unleased(plan) }, fenceAt: renewal.fenceAt }),
                  'replace',
                  t,
                ),
              (_, r3) => {
                // Next: the regular renewal, or sooner where the other's claim drops (a lost Region's tail ends).
                const drops = claimDropsAt(other, budgets, now).map(
                  (at) => at - now + t + RENEWER_CLOCK_TOLERANCE_MS,
                );
                p.due = Math.max(r3, Math.min(t + RENEW_MS, ...drops.filter((d) => d > t)));
                const at = early ? Math.min(p.due, r3 + POLL_MS) : p.due;
                agenda.at(at, () => poll(p, at));
              },
              (r3) => retry(p, r3),
            );
          },
          (r2) => retry(p, r2),
          lost,
        );
      },
      (r) => retry(p, r),
    );
  };

  if (rule === 'full-budget') {
    for (const region of REGIONS)
      adopt(
        undefined,
        region,
        0,
        { limits: fullShares([basePlan, taughtPlan?.plan]), fenceAt: Number.POSITIVE_INFINITY },
        'replace',
      );
  } else {
    for (const region of REGIONS) {
      for (const plan of options.regions[region].renewers ?? [{ clockOffsetMs: 0 }]) {
        const figures: RenewerFigures = {
          region,
          clockOffsetMs: plan.clockOffsetMs,
          writes: 0,
          adoptions: 0,
          refusals: {},
          stale: 0,
        };
        result.renewers.push(figures);
        const first = random() * RENEW_MS;
        const p = newProcess(region, plan, figures, first);
        agenda.at(first, () => poll(p, first));
      }
    }
  }

  if (learned && taughtPlan && learner && knownAt !== undefined)
    agenda.at(knownAt, () => {
      result.learnedAt = knownAt;
      onLearnedView[learner] = true;
      seedAll(
        ledgers[learner],
        clock(learner, knownAt),
        taughtPlan,
        learned,
        result.classSendTimes,
        knownAt - learned.answerLagMs,
        learnedRule !== 'unseeded',
      );
    });

  for (const ask of asks) {
    agenda.runUntil(ask.t);
    if (isDown(options.regions[ask.region], ask.t)) continue;
    recentAsks[ask.region].times.push(ask.t);
    const now = clock(ask.region, ask.t);
    const latest = store.latest(ask.region);
    const pastFence = rule !== 'full-budget' && (!latest || now >= latest.leaseUntil - CLOCK_BOUND_MS);
    if (pastFence) result.asksPastFence++;
    const callsBefore = store.calls;
    let granted: boolean;
    if (ask.cls === undefined) granted = ledgers[ask.region].grant(now);
    else {
      result.classAsks++;
      const plan = planOfAsk(ask.region, ask.t);
      granted = ledgers[ask.region].grantClass(now, plan, ask.cls);
      if (granted && plan !== basePlan) onLearnedView[ask.region] = true;
    }
    result.storeCallsOnGrantPath += store.calls - callsBefore;
    if (!granted) continue;
    if (pastFence) result.grantsPastFence++;
    result.served[ask.region]++;
    result.grantTimes[ask.region].push(ask.t);
    result.sendTimes.push(ask.t + ask.sendDelayMs);
    if (ask.cls !== undefined) {
      result.classSendTimes.push(ask.t + ask.sendDelayMs);
      if (settledAt !== undefined && ask.t >= settledAt) {
        settledSends.push(ask.t + ask.sendDelayMs);
        result.classSettled[ask.region]++;
      }
    }
  }
  result.vendor = checkVendorWindows(
    result.sendTimes,
    specs.map((s) => ({ limit: s.limit, windowMs: s.windowMs })),
  );
  if (learned) {
    const classLimits = learned.limits.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 }));
    result.classVendor = checkVendorWindows(result.classSendTimes, classLimits);
    result.classVendorSettled = checkVendorWindows(settledSends, classLimits);
  }
  return result;
}
