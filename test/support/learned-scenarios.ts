import fc from 'fast-check';
import type { WindowKind } from '../../sandbox/index.js';

/**
 * Random scenarios of the learned-limits property (test/classes-learned-property.test.ts): a vendor family with a
 * random shape, a clock offset, honest callers, demand, a limit that changes, at most one liar, DynamoDB faults.
 * Sized so that one run sends some tens of vendor requests at most: a run costs its DynamoDB calls, not its
 * simulated time.
 */

/** The learned class; its vendor family is `/reports/`. */
export const FAMILY = 'reports';

export interface Limit {
  limit: number;
  windowSeconds: number;
}

/** Family windows the ledger learns exactly (common windows, learned-limits.ts LEARNED_WINDOWS). */
export const EXACT_WINDOWS = [5, 10, 15, 30, 60] as const;
/** Windows that are no common length: learned as the next one up (4 as 5, 8 as 10, ...). */
export const ROUNDED_WINDOWS = [4, 8, 12, 20, 45] as const;

/** What a liar reports (docs/class-limits.md, the adversaries of T1-T6, I1-I4, H1, M3). */
export const LIAR_STRATEGIES = [
  /** A tighter limit than the vendor's (half of it, at least 1), over its own window. */
  'tight',
  /** A looser limit (several times the vendor's), starting on the probe before any honest answer. */
  'loose',
  /** A true limit of the family with its reset a day ahead (I4). */
  'far-reset',
  /** A 429 with a long Retry-After, naming a limit of the family or a made-up one (H1). */
  'fake-429',
  /** Tight and loose in turn, over windows cycling from 5 s to an hour (M3). */
  'alternating',
  /** A general limit at 0, reset a general window ahead, some with a 429 (I1, the general cooldown rules). */
  'general',
] as const;
export type LiarStrategy = (typeof LIAR_STRATEGIES)[number];

export interface Liar {
  strategy: LiarStrategy;
  /** When it reports first (s after the run starts), how often, how many times. */
  startSeconds: number;
  everyMs: number;
  reports: number;
  /** Which family window its reports are about (modulo the family's windows). */
  index: number;
  /** Its made-up window (s) and factor (how much looser, in percent of the true limit). */
  fakeWindowSeconds: number;
  factor: number;
  retryAfterSeconds: number;
}

/**
 * What a run is mostly for (every feature stays random in every kind): `use`, a long busy stretch once learned
 * (P3); `rise`, two or three callers and the vendor raising its binding window once learned, demand all along
 * (P4); `adversary`, a liar (P2); `mixed`, anything.
 */
export const KINDS = ['use', 'rise', 'adversary', 'mixed'] as const;
export type Kind = (typeof KINDS)[number];

export interface Scenario {
  /** What the run is mostly for (KINDS). */
  kind: Kind;
  windowKind: WindowKind;
  /** The vendor's family limits at the start: windows ascending and distinct, limits ascending and distinct. */
  family: Limit[];
  /** Whether the family's windows are common lengths (learned exactly). */
  exact: boolean;
  /** The vendor's general limits (configured in the ledger too, as a set's `general`). */
  general: Limit[];
  /** The vendor's clock minus the ledger's (ms). */
  offsetMs: number;
  /** The refresher's login round trip: sent this long before the vendor stamped its Date, received after. */
  login: { beforeMs: number; afterMs: number };
  /** Where the run starts in the vendor's fixed windows (ms past a whole day of ledger time; 360 s: every window's). */
  phaseMs: number;
  /** Honest callers: each a principal with its own vend process, its answers back after `latencyMs`. */
  callers: { latencyMs: number }[];
  /** Demand of every honest caller, in turn: busy (asks again as soon as it may) or idle. */
  phases: { seconds: number; busy: boolean }[];
  /** The vendor changes one family limit (index) to `to` at `atSeconds`. */
  change?: { atSeconds: number; index: number; to: number };
  liar?: Liar;
  faults: { lostAnswer: number; throttle: number; serverError: number };
  /** Seeds the DynamoDB faults and the ledgers' retry-hint spread. */
  seed: number;
}

export const durationOf = (scenario: Scenario): number =>
  scenario.phases.reduce((sum, phase) => sum + phase.seconds, 0);

/**
 * A family shape: 1 to 3 windows, each limit above the last and below what the last allows over the longer window
 * (so that every window binds at some demand), at most 9 a window.
 */
const familyArb = fc
  .record({
    exact: fc.integer({ min: 0, max: 3 }).map((n) => n > 0),
    picks: fc.uniqueArray(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 3 }),
    first: fc.integer({ min: 1, max: 3 }),
    grow: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 2, maxLength: 2 }),
  })
  .map(({ exact, picks, first, grow }) => {
    const windows = [...picks].sort((a, b) => a - b).map((i) => (exact ? EXACT_WINDOWS : ROUNDED_WINDOWS)[i]);
    const family: Limit[] = [];
    windows.forEach((windowSeconds, k) => {
      const before = family[k - 1];
      if (!before) {
        family.push({ limit: first, windowSeconds: windowSeconds as number });
        return;
      }
      const below = Math.floor((before.limit * (windowSeconds as number)) / before.windowSeconds) - 1;
      const room = Math.max(0, Math.min(9, below) - before.limit - 1);
      family.push({
        limit: before.limit + 1 + Math.floor((grow[k - 1] ?? 0) * room),
        windowSeconds: windowSeconds as number,
      });
    });
    return { family, exact };
  });

/** The least rate (per second) the family and the general limits allow together, over the longest window. */
const requestsPerSecond = (limits: readonly Limit[]): number =>
  Math.min(...limits.map((l) => l.limit / l.windowSeconds));

/** A value no limit of `limits` has: every limit's X-RateLimit-Limit then tells which one it is. */
const distinctFrom = (value: number, limits: readonly Limit[]): number => {
  let v = Math.max(1, value);
  while (limits.some((l) => l.limit === v)) v++;
  return v;
};

export const scenarioArb: fc.Arbitrary<Scenario> = familyArb.chain(({ family, exact }) =>
  fc
    .record({
      // Weighted by what each costs and tells: use and rise runs are the long ones.
      kind: fc.oneof(
        { arbitrary: fc.constant<Kind>('use'), weight: 4 },
        { arbitrary: fc.constant<Kind>('rise'), weight: 3 },
        { arbitrary: fc.constant<Kind>('adversary'), weight: 7 },
        { arbitrary: fc.constant<Kind>('mixed'), weight: 6 },
      ),
      windowKind: fc.constantFrom<WindowKind>('fixed', 'sliding'),
      general: fc.record({
        factor: fc.double({ min: 0.6, max: 4, noNaN: true }),
        windowSeconds: fc.constantFrom(10, 30, 60, 120),
      }),
      offsetMs: fc.oneof(
        fc.integer({ min: -2000, max: 2000 }),
        fc.integer({ min: -60_000, max: 60_000 }),
        fc.integer({ min: -900_000, max: 900_000 }),
      ),
      login: fc.record({
        beforeMs: fc.integer({ min: 0, max: 800 }),
        afterMs: fc.integer({ min: 0, max: 800 }),
      }),
      phaseMs: fc.integer({ min: 0, max: 359_999 }),
      callers: fc.array(fc.record({ latencyMs: fc.integer({ min: 0, max: 300 }) }), {
        minLength: 1,
        maxLength: 3,
      }),
      /** In requests the binding limits allow: what bounds a run's cost. */
      budget: fc.integer({ min: 4, max: 24 }),
      phases: fc.array(fc.record({ weight: fc.integer({ min: 1, max: 4 }), busy: fc.boolean() }), {
        minLength: 1,
        maxLength: 4,
      }),
      change: fc.option(
        fc.record({
          at: fc.double({ min: 0.25, max: 0.6, noNaN: true }),
          index: fc.nat(),
          up: fc.boolean(),
          by: fc.integer({ min: 1, max: 3 }),
        }),
        { freq: 2 },
      ),
      liar: fc.record({
        strategy: fc.constantFrom(...LIAR_STRATEGIES),
        start: fc.double({ min: 0, max: 0.6, noNaN: true }),
        everyMs: fc.integer({ min: 500, max: 8000 }),
        reports: fc.integer({ min: 1, max: 6 }),
        index: fc.nat(),
        fakeWindowSeconds: fc.integer({ min: 1, max: 120 }),
        factor: fc.integer({ min: 150, max: 1000 }),
        retryAfterSeconds: fc.integer({ min: 30, max: 86_400 }),
      }),
      withLiar: fc.boolean(),
      faults: fc.oneof(
        fc.constant({ lostAnswer: 0, throttle: 0, serverError: 0 }),
        fc.record({
          lostAnswer: fc.double({ min: 0, max: 0.1, noNaN: true }),
          throttle: fc.double({ min: 0, max: 0.08, noNaN: true }),
          serverError: fc.double({ min: 0, max: 0.08, noNaN: true }),
        }),
      ),
      seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    })
    .map((drawn): Scenario => {
      const longest = Math.max(...family.map((l) => l.windowSeconds));
      // The general limit: near the family's pace over its window (binding now and then), another value.
      const generalWindow = drawn.general.windowSeconds;
      const paced = Math.round(requestsPerSecond(family) * generalWindow * drawn.general.factor);
      const general = [{ limit: distinctFrom(Math.max(2, paced), family), windowSeconds: generalWindow }];
      const rate = requestsPerSecond([...family, ...general]);
      // Learning: the probe, then every window named once it binds (the longest last), then a settle time.
      const learning = 2 * longest + 10;
      const { kind } = drawn;
      // The binding window of the family (the least rate): the one a rise shows in the vendor's headers.
      const binding = family.reduce(
        (b, l, k) =>
          l.limit / l.windowSeconds < (family[b] as Limit).limit / (family[b] as Limit).windowSeconds ? k : b,
        0,
      );
      const raised = family[binding] as Limit;
      const rise = kind === 'rise' && raised.limit <= 3;
      let phases: Scenario['phases'];
      let change: Scenario['change'];
      if (kind === 'use') {
        // Learning, then about 11 requests of the binding limits (P3 measures 10 or more).
        phases = [{ seconds: Math.ceil(learning + 11 / rate), busy: true }];
      } else if (rise) {
        // The rise once learned, then time for two callers' reports, the trial's windows and the bound, busy.
        const at = Math.ceil(learning + 2 * longest);
        phases = [{ seconds: at + 9 * raised.windowSeconds + 10, busy: true }];
        change = changeOf({ index: binding, up: true, by: 1 + (drawn.budget % 3) }, family, general, at);
      } else {
        const seconds = Math.max(learning + longest, Math.min(12 * longest, 10 + drawn.budget / rate));
        // The first phase is busy: a run that never asks tells nothing.
        phases = [{ seconds: Math.ceil(seconds / 3), busy: true }, ...phasesOf(drawn.phases, seconds)];
        const duration = phases.reduce((sum, p) => sum + p.seconds, 0);
        if (drawn.change)
          change = changeOf(drawn.change, family, general, Math.floor(drawn.change.at * duration));
      }
      const duration = phases.reduce((sum, p) => sum + p.seconds, 0);
      const liar = kind === 'adversary' || (kind === 'mixed' && drawn.withLiar) ? drawn.liar : undefined;
      return {
        kind,
        windowKind: drawn.windowKind,
        family,
        exact,
        general,
        offsetMs: drawn.offsetMs,
        login: drawn.login,
        phaseMs: drawn.phaseMs,
        // Two callers at least where a rise is to be seen (R1: two callers' reports).
        callers: rise && drawn.callers.length < 2 ? [...drawn.callers, { latencyMs: 0 }] : drawn.callers,
        phases,
        ...(change ? { change } : {}),
        ...(liar
          ? {
              liar: {
                strategy: liar.strategy,
                startSeconds: Math.floor(liar.start * duration),
                everyMs: liar.everyMs,
                reports: liar.reports,
                index: liar.index % family.length,
                fakeWindowSeconds: liar.fakeWindowSeconds,
                factor: liar.factor,
                retryAfterSeconds: liar.retryAfterSeconds,
              },
            }
          : {}),
        faults: drawn.faults,
        seed: drawn.seed,
      };
    }),
);

/** Phases of these weights over `seconds`. */
const phasesOf = (
  weights: readonly { weight: number; busy: boolean }[],
  seconds: number,
): Scenario['phases'] => {
  const total = weights.reduce((sum, p) => sum + p.weight, 0);
  return weights.map((p) => ({ seconds: Math.ceil((seconds * p.weight) / total), busy: p.busy }));
};

function changeOf(
  drawn: { index: number; up: boolean; by: number },
  family: readonly Limit[],
  general: readonly Limit[],
  atSeconds: number,
): Scenario['change'] {
  const index = drawn.index % family.length;
  const from = (family[index] as Limit).limit;
  if (!drawn.up && from <= 1) return undefined;
  const wanted = drawn.up ? from + drawn.by : Math.max(1, from - drawn.by);
  const others = [...family, ...general];
  // Another value than every limit's (a lower one may meet a shorter window's: then one below, or none).
  let to = wanted;
  while (others.some((l) => l.limit === to)) to += drawn.up ? 1 : -1;
  if (to < 1) return undefined;
  return { atSeconds, index, to };
}
