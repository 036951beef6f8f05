import { createHash } from 'node:crypto';
import type { RateLimit, RateLimitSettings } from '../config/rate-limits.js';
import { ConfigurationError } from '../errors.js';
import {
  LONGEST_LEARNED_WINDOW,
  MAX_LEARNED_LIMIT,
  MAX_LEARNED_WINDOWS,
  MIN_LEARNED_WINDOWS,
  PROBE_LIMIT,
} from './learned-limits.js';
import {
  CALLER_TAG_LENGTH,
  CARRIED_WRITE_IDS,
  GIVE_BACK_SLACK_MS,
  RECEIPT_ID_LENGTH,
  SPENT_LIMIT,
  WRITE_ID_LENGTH,
  WRITE_IDS_LIMIT,
} from './receipts.js';

/**
 * How the rate-limit settings of a credential set become rings of slot counters.
 * A limit "L per W" gets a ring of slots of W/60 covering W + D (D = marginSeconds): a permit granted at g may
 * be sent until g + V (V ≤ D), so any send span of length W only holds grants of a grant span of W + D.
 */
export const SLOTS_PER_WINDOW = 60;
/**
 * Slots per window of a class's rings in item format 2: a class's limits are lower and its grants rarer, and
 * coarser slots keep four classes' rings within one write unit. The sub-slot of each slot's latest grant still
 * frees it within 1/36th of a slot of its exact time (5 s slots of a minute: 0.14 s); the bound holds for any slot.
 */
export const CLASS_SLOTS_PER_WINDOW = 12;
/**
 * How the ledger item is written. 1: the text rings release N-1 reads (the default, until every running release
 * reads format 2: docs/deploying.md, "Rolling forward and back"). 2: packed (state-codec.ts), which fits the
 * general limits and four classes in one write unit; release N-1 cannot read it and fails closed on it.
 */
export type ItemFormat = 1 | 2;
/** Format 2 keeps a vendor cap's end in units of this many ms after the item's time, rounded up (never shorter). */
export const CAP_UNTIL_MS = 10;
/** Each slot also keeps the 1/36th part of it that holds its latest grant, so a slot frees almost on time. */
export const SUB_SLOTS = 36;
export const GENERAL_SCOPE = '*';
/** The ring of a general window's shared part, when the window has reservations (see ReservedWindow). */
export const SHARED_SCOPE = '~';
/** The ring of a consumer's reservation in a general window. */
export const reservedScope = (consumer: string): string => `@${consumer}`;
/** Reserved consumers per credential set: each adds a ring per window it holds a reservation in. */
export const MAX_RESERVED_CONSUMERS = 10;
/** Per window, reservations leave at least this share of the limit (rounded up) to be shared. */
export const MIN_SHARED_FRACTION = 0.1;
const CONSUMER_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const CLASS_NAME = /^[a-z][a-z0-9-]*$/;
/**
 * A permit may be sent until the end of its validity; the margin the rings are widened by must also hold the
 * request's trip from the consumer to the vendor after that moment and the clocks' disagreement. So the
 * validity must leave at least this share of the margin free (2 s of 3 s by default leaves 1 s).
 */
export const MIN_SLACK_FRACTION = 0.2;
/** Request classes per credential set (each adds rings to the one ledger item; see ITEM_BYTES_BUDGET). */
export const MAX_CLASSES = 4;
/**
 * Every ledger write is charged by the larger of the item before and after it, in 1 KB units: the item is kept
 * within one unit at its worst (every ring as full as its limits allow, every id and cap slot taken).
 */
export const ITEM_BYTES_BUDGET = 1024;
/**
 * A set with reservations keeps a ring per reservation and a shared ring per reserved window beside the general
 * ones: its item may take up to 4 write units (a few reservations at the default limits take 2).
 */
export const RESERVED_ITEM_BYTES_BUDGET = 4096;

export interface RingSpec {
  /** `<scope>/<window ms, base 36>[.<slots per window, base 36>]` (see ringKey): names the ring in the stored item. */
  key: string;
  /** GENERAL_SCOPE or a class name. */
  scope: string;
  limit: number;
  windowSeconds: number;
  windowMs: number;
  /** Slots per window (SLOTS_PER_WINDOW, or CLASS_SLOTS_PER_WINDOW for a class in item format 2). */
  slots: number;
  slotMs: number;
  /** W + D: the grant span in which at most `limit` grants may fall. */
  spanMs: number;
  /** Slots kept: every slot that can intersect a span ending at or after the newest slot. */
  length: number;
}

/**
 * Reservations in one general window of limit L: consumer c holds R_c, and S = L - sum(R_c) is shared.
 * Every grant of k is split: a = what of k its consumer's reservation ring still has room for (0 without a
 * reservation), b = k - a. `a` is recorded in the consumer's ring (limit R_c), `b` in the shared ring (limit S),
 * k in the general ring (what the operator sees). A grant needs room for a in the first (true by choice of a)
 * and b in the second, nothing else. Proof of the bound: every ring holds at most its limit in any span (each
 * grant checked it, give-backs only lower it, the ring is conservative: ring.ts), and the general ring's
 * grants of a span are exactly the sum of the reservation rings' and the shared ring's in that span, so at
 * most sum(R_c) + S = L. The guarantee: a consumer that asks for k with room for k in its own ring gets a = k,
 * b = 0, so nothing the others did can refuse it for quota (a vendor cooldown, a vendor cap, or a class limit
 * still can: those are the vendor's word, or limits it holds no reservation in). No lending: an unused
 * reservation stays unused. Not only the simplest choice: a consumer with u < R used may ask for R - u the
 * next millisecond, and a permit lent at t counts for the window plus margin after t, so a loan could only be
 * repaid by breaking the bound or the guarantee; bounding loans in time needs a bound on the reserved
 * consumer's demand, which the guarantee does not assume. What it costs, measured: docs/design.md, "Reservations".
 */
export interface ReservedWindow {
  shared: RingSpec;
  /** By consumer name. */
  reserved: ReadonlyMap<string, RingSpec>;
}

export interface LimitPlan {
  general: RingSpec[];
  /** By general ring key: the windows with reservations (none: empty, and the ledger is as it was without). */
  reserved: ReadonlyMap<string, ReservedWindow>;
  classes: ReadonlyMap<string, RingSpec[]>;
  /**
   * The classes configured with no limits (`[]`): their rings are the probe or what was learned
   * (learned-limits.ts), and the item is sized for the most they can learn.
   */
  learned: ReadonlySet<string>;
  /**
   * Windows each learned class may keep (learned-limits.ts, rule M2): MAX_LEARNED_WINDOWS where the item has room
   * for every learned class at its worst with them, else MIN_LEARNED_WINDOWS.
   */
  learnedWindows: number;
  marginMs: number;
  validityMs: number;
  /** The longest span of any ring. */
  maxSpanMs: number;
  /** The most bytes the ledger item of this plan can take (ledgerItemBound). */
  itemBytesBound: number;
  /** How the item is written (ItemFormat). */
  itemFormat: ItemFormat;
  /** How long after its last full write the state still matters: grants go up to a slot later, then span. */
  retainMs: number;
  /**
   * What the reservations are ('' without any; else 8 characters of a hash of every reserved window's shared
   * and reserved limits), kept in the ledger item. Reservations changed on a set whose rings hold grants: the
   * new shared and reservation rings know nothing of the grants before, so for one span after the change the
   * general rings of reserved windows are checked too (LedgerState.reservationsChangedAt). The bound holds
   * across the change; the guarantee resumes once the grants from before have left the span.
   */
  reservationsKey: string;
  /**
   * The general ring of a window with reservations is checked against its limit like any ring, not only for a
   * span after the reservations changed: a Region's share of the window (region-share.ts) is on the window.
   */
  checkReserved?: boolean;
  /**
   * By learned ring key: what a report counted for the window it taught (learned-store.ts `sd`: `n` at ledger time
   * `at`, written at learned version `v`, of the ledger key tagged `k`), while it can still be in the ring's span: a
   * ledger that first holds the ring seeds it from this (ledger-state.ts seedFromLearned).
   */
  seeds?: ReadonlyMap<string, { n: number; at: number; v: number; k?: string }>;
}

export const slotMsFor = (windowMs: number, slots = SLOTS_PER_WINDOW): number =>
  Math.max(1, Math.floor(windowMs / slots));
export const ringKey = (scope: string, windowMs: number, slots = SLOTS_PER_WINDOW): string =>
  `${scope}/${windowMs.toString(36)}${slots === SLOTS_PER_WINDOW ? '' : `.${slots.toString(36)}`}`;
/**
 * A limit's window as the item's cap windows (`cw`, state-codec.ts) name it: whole seconds in base 36 (`1o` for a
 * minute, `2s0` for an hour), else `.` and milliseconds in base 36.
 */
export const windowCode = (windowMs: number): string =>
  windowMs % 1000 === 0 ? (windowMs / 1000).toString(36) : `.${windowMs.toString(36)}`;
/** Slots a ring keeps: every slot that can intersect a span (window + margin) ending at or after the newest slot. */
export const ringLength = (windowMs: number, marginMs: number, slotMs: number): number =>
  Math.ceil((windowMs + marginMs) / slotMs) + 1;

/** Ring keys read so far (a process sees a few): every item's rings are read by key at every operation. */
const parsedRingKeys = new Map<string, Readonly<{ scope: string; windowMs: number; slotMs: number }>>();
const MAX_PARSED_RING_KEYS = 1000;

/** What a ring key says: its scope, window and slot length (every process reads a stored ring the same way). */
export function parseRingKey(key: string): Readonly<{ scope: string; windowMs: number; slotMs: number }> {
  const known = parsedRingKeys.get(key);
  if (known) return known;
  const at = key.lastIndexOf('/');
  const [window = '', slots] = key.slice(at + 1).split('.');
  const windowMs = Number.parseInt(window, 36);
  const perWindow = slots === undefined ? SLOTS_PER_WINDOW : Number.parseInt(slots, 36);
  const parsed = { scope: key.slice(0, at), windowMs, slotMs: slotMsFor(windowMs, perWindow) };
  if (parsedRingKeys.size >= MAX_PARSED_RING_KEYS) parsedRingKeys.clear();
  parsedRingKeys.set(key, parsed);
  return parsed;
}

/** The rings of the learned classes, as learned-limits.ts learnedRingLimits says (absent: the probe). */
export type LearnedRings = Readonly<Record<string, readonly RateLimit[]>>;

const plans = new WeakMap<RateLimitSettings, Map<string, LimitPlan>>();
/**
 * The same plan for equal settings, whatever the object: a stage's sets usually share the vendor's defaults,
 * and compiling (the worst-case item size above all) once instead of once per set keeps a 100-set cold start
 * from compiling 100 identical plans. Bounded by the distinct settings (and learned views) a process has seen.
 */
const plansByValue = new Map<string, LimitPlan>();
const MAX_CACHED_LEARNED_PLANS = 1000;

/**
 * The plan for a settings object, validated once and then cached (settings are parsed once at cold start), with
 * the learned classes' rings as `learned` says (the probe for a class it does not name). The plan of one learned
 * view is cached too, so a request does not compile it again.
 */
export function planFor(settings: RateLimitSettings, learned?: LearnedRings): LimitPlan {
  const learnedKey = learned === undefined ? '' : JSON.stringify(learned);
  const byLearned = plans.get(settings);
  const cached = byLearned?.get(learnedKey);
  if (cached) return cached;
  const key = `${JSON.stringify(settings)}|${learnedKey}`;
  const plan = plansByValue.get(key) ?? compile(settings, learned);
  if (plansByValue.size >= MAX_CACHED_LEARNED_PLANS) plansByValue.clear();
  plansByValue.set(key, plan);
  const map = byLearned ?? new Map<string, LimitPlan>();
  if (map.size >= MAX_CACHED_LEARNED_PLANS) map.clear();
  map.set(learnedKey, plan);
  plans.set(settings, map);
  return plan;
}

/** Every ring of the plan: general, classes', shared and reservations'. */
export function allRings(plan: LimitPlan): RingSpec[] {
  return [
    ...plan.general,
    ...[...plan.classes.values()].flat(),
    ...[...plan.reserved.values()].flatMap((w) => [w.shared, ...w.reserved.values()]),
  ];
}

/**
 * The most one grant of `cls` can ever give `consumer` (its configured name, if any): the smallest limit, where
 * a window with reservations gives the shared part plus the consumer's own reservation there.
 */
export function largestGrant(plan: LimitPlan, cls: string | undefined, consumer: string | undefined): number {
  return Math.min(
    ...ringsFor(plan, cls).map((spec) => {
      const window = plan.reserved.get(spec.key);
      if (!window) return spec.limit;
      return window.shared.limit + ((consumer && window.reserved.get(consumer)?.limit) || 0);
    }),
  );
}

/** The rings a permit of `cls` counts against: the general ones, then the class's. */
export function ringsFor(plan: LimitPlan, cls: string | undefined): RingSpec[] {
  if (cls === undefined) return plan.general;
  return [...plan.general, ...(plan.classes.get(cls) ?? [])];
}

function compile(settings: RateLimitSettings, learnedRings: LearnedRings | undefined): LimitPlan {
  const fail = (message: string): never => {
    throw new ConfigurationError(`rate limit settings: ${message}`);
  };
  if (!settings || typeof settings !== 'object') fail('missing');
  const { marginSeconds, permitValiditySeconds } = settings;
  if (!Number.isFinite(marginSeconds) || marginSeconds < 0) fail('marginSeconds must be a number ≥ 0');
  if (!Number.isFinite(permitValiditySeconds) || permitValiditySeconds <= 0)
    fail('permitValiditySeconds must be a number > 0');
  // The bound holds only if every permit is sent inside the margin the rings were widened by.
  if (permitValiditySeconds > marginSeconds * (1 - MIN_SLACK_FRACTION))
    fail(
      `permitValiditySeconds must leave at least ${MIN_SLACK_FRACTION * 100} % of marginSeconds as slack (at most ${
        marginSeconds * (1 - MIN_SLACK_FRACTION)
      })`,
    );
  const marginMs = Math.round(marginSeconds * 1000);
  if (settings.itemFormat !== undefined && settings.itemFormat !== 1 && settings.itemFormat !== 2)
    fail('itemFormat must be 1 or 2');
  const specs = (scope: string, limits: unknown, path: string, slots = SLOTS_PER_WINDOW): RingSpec[] => {
    if (!Array.isArray(limits) || limits.length === 0) fail(`${path} must be a non-empty list of limits`);
    return (limits as RateLimitSettings['general']).map((entry, index) => {
      const { limit, windowSeconds } = entry ?? {};
      if (!Number.isSafeInteger(limit) || limit < 1) fail(`${path}[${index}].limit must be an integer ≥ 1`);
      const windowMs = Math.round(windowSeconds * 1000);
      if (!Number.isFinite(windowSeconds) || windowMs < 1)
        fail(`${path}[${index}].windowSeconds must be > 0`);
      return {
        key: ringKey(scope, windowMs, slots),
        scope,
        limit,
        windowSeconds,
        windowMs,
        slots,
        slotMs: slotMsFor(windowMs, slots),
        spanMs: windowMs + marginMs,
        length: ringLength(windowMs, marginMs, slotMsFor(windowMs, slots)),
      };
    });
  };
  const general = specs(GENERAL_SCOPE, settings.general, 'general');
  const reserved = compileReservations(settings.reservations, general, marginMs, fail);
  const reservationsKey = keyOfReservations(reserved);
  const validityMs = Math.round(permitValiditySeconds * 1000);
  if (Object.keys(settings.classes ?? {}).length > MAX_CLASSES) fail(`at most ${MAX_CLASSES} classes`);
  const learned = new Set(
    Object.entries(settings.classes ?? {})
      .filter(([, limits]) => Array.isArray(limits) && limits.length === 0)
      .map(([name]) => name),
  );
  if (learned.size > 0 && settings.itemFormat === 1)
    fail(
      `itemFormat 1 cannot hold a learned class (${[...learned].map((n) => `classes.${n} = []`).join(', ')}): its rings are sized for what it may learn, which only item format 2 fits; leave itemFormat unset or give the class its limits`,
    );
  /**
   * A learned class's rings: as learned (the probe until then); `worst` (a number of windows): the most it may ever
   * hold, for sizing the item: the probe (its ring lingers while the class is used, rule M3) and that many limits
   * of MAX_LEARNED_LIMIT over the longest learned windows.
   */
  const learnedLimits = (name: string, worst: number | 'learned'): RateLimit[] =>
    worst !== 'learned'
      ? [
          PROBE_LIMIT,
          ...Array.from({ length: worst }, (_, i) => ({
            limit: MAX_LEARNED_LIMIT,
            windowSeconds: LONGEST_LEARNED_WINDOW - i,
          })),
        ]
      : [...(learnedRings?.[name] ?? [PROBE_LIMIT])];
  const classesIn = (format: ItemFormat, worst: number | 'learned' = MIN_LEARNED_WINDOWS) => {
    const classes = new Map<string, RingSpec[]>();
    for (const [name, limits] of Object.entries(settings.classes ?? {})) {
      if (!CLASS_NAME.test(name)) fail('class names must be lowercase letters, digits and dashes');
      const slots = format === 2 ? CLASS_SLOTS_PER_WINDOW : SLOTS_PER_WINDOW;
      if (!learned.has(name)) classes.set(name, specs(name, limits, `classes.${name}`, slots));
      else {
        const ring = learnedLimits(name, worst);
        classes.set(name, ring.length === 0 ? [] : specs(name, ring, `classes.${name} (learned)`, slots));
      }
    }
    return classes;
  };
  const ringsIn = (classes: Map<string, RingSpec[]>) => [
    ...general,
    ...[...classes.values()].flat(),
    ...[...reserved.values()].flatMap((w) => [w.shared, ...w.reserved.values()]),
  ];
  const boundIn = (format: ItemFormat, classes: Map<string, RingSpec[]>) =>
    format === 2
      ? packedItemBound(ringsIn(classes), validityMs, reservationsKey.length)
      : textItemBound(ringsIn(classes), classes.size, reservationsKey.length);
  const budget = reserved.size > 0 ? RESERVED_ITEM_BYTES_BUDGET : ITEM_BYTES_BUDGET;
  // Settings the previous release accepted keep format 1 (which it reads), even where the bound as it is now
  // counted (every head sub-slot, carried ids) exceeds the budget: a canary or a rollback runs both releases.
  // Moving them to format 2 takes `itemFormat: 2` once no release older than this one runs (docs/deploying.md).
  const classes1 = classesIn(1);
  const acceptedBefore =
    textItemBound(ringsIn(classes1), classes1.size, reservationsKey.length, true) <= budget;
  // Unset: format 1 where the previous release accepted the settings or the item fits it, else packed.
  // A learned class: format 2 (release N-1 refuses `[]` in its configuration, so no item of it is read there).
  const itemFormat: ItemFormat =
    settings.itemFormat ?? (learned.size === 0 && (acceptedBefore || boundIn(1, classes1) <= budget) ? 1 : 2);
  // Sized for the most the learned classes can learn, with three windows each where that fits (M2); the rings are
  // those learned now.
  const roomy = learned.size > 0 && itemFormat === 2 ? classesIn(2, MAX_LEARNED_WINDOWS) : undefined;
  const learnedWindows = roomy && boundIn(2, roomy) <= budget ? MAX_LEARNED_WINDOWS : MIN_LEARNED_WINDOWS;
  const sized =
    itemFormat === 1 ? classes1 : learnedWindows === MAX_LEARNED_WINDOWS && roomy ? roomy : classesIn(2);
  const classes = learned.size === 0 ? sized : classesIn(itemFormat, 'learned');
  const all = [...ringsIn(classes), ...ringsIn(sized)];
  const itemBytesBound = boundIn(itemFormat, sized);
  if (itemBytesBound > budget && !(itemFormat === 1 && acceptedBefore)) {
    const packed = itemFormat === 1 ? boundIn(2, classesIn(2)) : 0;
    const hint =
      itemFormat === 1 && packed <= budget
        ? `; item format 2 would take ${packed} (rateLimits.itemFormat: 2, or leave it unset: docs/deploying.md)`
        : '';
    fail(
      reserved.size > 0
        ? `these limits and reservations could make the ledger item ${itemBytesBound} bytes, over ${budget}${hint}: use fewer reservations, classes or windows`
        : `these limits could make the ledger item ${itemBytesBound} bytes, over one write unit (${ITEM_BYTES_BUDGET})${hint}: use fewer classes or windows`,
    );
  }
  return {
    general,
    reserved,
    classes,
    learned,
    learnedWindows,
    marginMs,
    validityMs,
    maxSpanMs: Math.max(...ringsIn(classes).map((spec) => spec.spanMs)),
    retainMs: Math.max(...all.map((spec) => spec.spanMs + spec.slotMs)),
    itemBytesBound,
    itemFormat,
    reservationsKey,
  };
}

/** Characters of LimitPlan.reservationsKey (when there are reservations). */
export const RESERVATIONS_KEY_LENGTH = 8;
/** LimitPlan.reservationsKey: '' without reservations. */
function keyOfReservations(reserved: ReadonlyMap<string, ReservedWindow>): string {
  if (reserved.size === 0) return '';
  const canonical = [...reserved]
    .map(([key, window]) => [
      key,
      window.shared.limit,
      [...window.reserved].map(([consumer, spec]) => [consumer, spec.limit]).sort(),
    ])
    .sort();
  return createHash('sha256')
    .update(JSON.stringify(canonical))
    .digest('base64url')
    .slice(0, RESERVATIONS_KEY_LENGTH);
}

/** Checks the reservations against the general limits and makes their rings (see ReservedWindow). */
function compileReservations(
  reservations: RateLimitSettings['reservations'],
  general: readonly RingSpec[],
  marginMs: number,
  fail: (message: string) => never,
): Map<string, ReservedWindow> {
  const windows = new Map<string, ReservedWindow>();
  if (reservations === undefined) return windows;
  if (!Array.isArray(reservations)) fail('reservations must be a list');
  if (reservations.length > MAX_RESERVED_CONSUMERS)
    fail(`reservations: at most ${MAX_RESERVED_CONSUMERS} consumers, not ${reservations.length}`);
  const byWindow = new Map<RingSpec, Map<string, number>>();
  const seen = new Set<string>();
  reservations.forEach((entry, index) => {
    const path = `reservations[${index}]`;
    const consumer = entry?.consumer;
    if (typeof consumer !== 'string' || !CONSUMER_NAME.test(consumer))
      fail(`${path}.consumer must be the name of a consumer`);
    if (seen.has(consumer)) fail(`${path}.consumer: "${consumer}" has two reservations; give it one`);
    seen.add(consumer);
    const perWindow = Object.entries(entry.perWindow ?? {});
    if (perWindow.length === 0) fail(`${path}.perWindow must reserve something in at least one window`);
    for (const [seconds, amount] of perWindow) {
      const spec = general.find((g) => String(g.windowSeconds) === seconds);
      if (!spec)
        fail(
          `${path}.perWindow.${seconds}: no general limit has windowSeconds ${seconds} (the general windows are ${general
            .map((g) => g.windowSeconds)
            .join(', ')})`,
        );
      if (!Number.isSafeInteger(amount) || amount < 1)
        fail(`${path}.perWindow.${seconds} must be an integer ≥ 1`);
      const found = spec as RingSpec;
      const entries = byWindow.get(found) ?? new Map<string, number>();
      entries.set(consumer, amount);
      byWindow.set(found, entries);
    }
  });
  for (const [spec, entries] of byWindow) {
    const total = [...entries.values()].reduce((sum, n) => sum + n, 0);
    const most = spec.limit - Math.ceil(spec.limit * MIN_SHARED_FRACTION);
    if (total > most)
      fail(
        `reservations in the ${spec.windowSeconds} s window add up to ${total}, over ${most} (the limit ${spec.limit} less the ${
          MIN_SHARED_FRACTION * 100
        } % kept shared)`,
      );
    const ring = (scope: string, limit: number): RingSpec => ({
      ...spec,
      key: ringKey(scope, spec.windowMs),
      scope,
      limit,
      length: ringLength(spec.windowMs, marginMs, spec.slotMs),
    });
    windows.set(spec.key, {
      shared: ring(SHARED_SCOPE, spec.limit - total),
      reserved: new Map(
        [...entries].map(([consumer, amount]) => [consumer, ring(reservedScope(consumer), amount)]),
      ),
    });
  }
  return windows;
}

/** Characters of the `cap` text's fingerprint in `cw` (state-codec.ts). */
export const CAP_FINGERPRINT_LENGTH = 3;
const base36Digits = (n: number): number => Math.max(1, Math.ceil(Math.log(n + 1) / Math.log(36)));
/** DynamoDB's size of a number: about one byte per two significant digits, plus one. */
const numberBytes = (n: number): number => Math.ceil(String(n).length / 2) + 1;
/** Bytes of an unsigned LEB128 varint (state-codec.ts's packed format). */
export const varintBytes = (n: number): number => (n < 128 ? 1 : 1 + varintBytes(Math.floor(n / 128)));
/** The attributes every item has, at their largest: pk (`token#` + 64), v, n, t, purgeAt, cd, k. */
const FIXED_BYTES = 2 + 70 + (1 + 8) + (1 + 8) + (1 + 8) + (7 + 7) + (2 + 8) + (1 + 22);
/** Sub-slots a head's set (`s:<key>`) can hold: the full write's, and one per head addition since (w's room). */
const HEAD_SUBS = Math.min(SUB_SLOTS, 1 + WRITE_IDS_LIMIT);

/**
 * A ring covers one span and two slots, and no span holds more than the limit: so at most limit + 2 of its older
 * slots are not empty, and they hold at most twice the limit in all. `extra(threshold)` counts, for a code whose
 * size grows by one unit at each of the thresholds, the most units that many permits can add above one per slot.
 */
function ringFill(spec: RingSpec): {
  older: number;
  nonEmpty: number;
  extra: (thresholds: number[]) => number;
} {
  const older = spec.length - 1;
  const nonEmpty = Math.min(older, spec.limit + 2);
  const most = 2 * spec.limit;
  return {
    older,
    nonEmpty,
    extra: (thresholds) => thresholds.reduce((sum, t) => sum + Math.min(nonEmpty, Math.floor(most / t)), 0),
  };
}

/** The limits a vendor cap can be held for (vendor-caps.ts): general or of a class; not reservations' parts. */
const capLimits = (specs: readonly RingSpec[]): RingSpec[] =>
  specs.filter((spec) => spec.scope !== SHARED_SCOPE && !spec.scope.startsWith('@'));

/** `cdr`, the furthest cooldown claim: its caller's tag and 7 digits of Unix seconds (both formats). */
const CLAIM_BYTES = 3 + CALLER_TAG_LENGTH + 7;

/**
 * Format 1's vendor caps (vendor-caps.ts): at most one per limit; one limit's cap costs its entry in `cap`
 * (`<scope>:<remaining, below the limit>:<until, 9 digits>;`) and its window in `cw` (`<window code>,`), e.g.
 * 15 + 3 bytes for a minute general cap. Then `cap`'s and `cw`'s names and `cw`'s fingerprint, and `cdr`.
 */
function textCapBytes(specs: readonly RingSpec[]): number {
  return (
    capLimits(specs).reduce(
      (sum, spec) =>
        sum +
        (spec.scope.length + 1 + base36Digits(spec.limit) + 1 + 9 + 1) +
        (windowCode(spec.windowMs).length + 1),
      3 + 2 + CAP_FINGERPRINT_LENGTH + 1,
    ) + CLAIM_BYTES
  );
}

/** The caps as the previous release counted them: 4, or one per scope if there were more scopes. */
function previousCapBytes(specs: readonly RingSpec[], classCount: number): number {
  const longestScope = Math.max(1, ...specs.map((spec) => spec.scope.length));
  const caps = Math.max(4, classCount + 1);
  return 3 + caps * (longestScope + 1 + base36Digits(Math.max(...specs.map((s) => s.limit))) + 1 + 9 + 1);
}

/** The write ids (`w`, a string set) and, with reservations, their key and change time (`rk`, `rc`). */
const idBytes = (reservationsKeyLength: number): number =>
  1 +
  WRITE_IDS_LIMIT * WRITE_ID_LENGTH +
  (reservationsKeyLength > 0 ? 2 + reservationsKeyLength + (2 + 8) : 0);

/**
 * The most bytes a ledger item of item format 1 can take with these rings (state-codec.ts, ledger-item.ts), by
 * DynamoDB's rules (attribute names count; strings by their UTF-8 length; a number set by its numbers). Per ring,
 * the head as two attributes (its count, and the set of its grants' sub-slots) and the older slots as
 * `<sub digit><count>` separated by commas. Checked against items filled as full as they get in the tests.
 */
export function textItemBound(
  specs: readonly RingSpec[],
  classCount: number,
  reservationsKeyLength = 0,
  /** The bound as the previous release computed it: a head's sub-slots as one value, ids carried only with reservations. */
  asPreviousRelease = false,
): number {
  const headSubs = asPreviousRelease ? 1 : HEAD_SUBS;
  const carried = !asPreviousRelease || reservationsKeyLength > 0;
  let bytes =
    FIXED_BYTES +
    (1 + SPENT_LIMIT * RECEIPT_ID_LENGTH) +
    (carried ? 2 + CARRIED_WRITE_IDS * (WRITE_ID_LENGTH + 1) : 0) +
    idBytes(reservationsKeyLength);
  let rings = 1; // the attribute name `r`
  for (const spec of specs) {
    const { older, nonEmpty, extra } = ringFill(spec);
    // Each slot holding 36^d or more needs a (d+1)th digit.
    const thresholds: number[] = [];
    for (let power = 36; power <= spec.limit; power *= 36) thresholds.push(power);
    rings += spec.key.length + 1 + (older + 2 * nonEmpty + extra(thresholds)) + 1;
    // h:<key> = count, s:<key> = { sub-slots }
    bytes += 2 + spec.key.length + numberBytes(spec.limit) + 2 + spec.key.length + headSubs * numberBytes(35);
  }
  return bytes + rings + (asPreviousRelease ? previousCapBytes(specs, classCount) : textCapBytes(specs));
}

/**
 * The most bytes a ledger item of item format 2 can take (state-codec.ts, "packed"): `r` marks the format; `rb`
 * holds the rings' scopes (each name once), every ring's window, slots and older slots (one varint each: 0 empty,
 * else (count - 1) * 36 + sub + 1), the vendor caps (one per limit at most: scope, window, remaining, end after
 * the item's time), the carried write ids (4 bytes each) and the spent receipt ids (their expiry after the item's time, 3
 * random bytes); per ring `H<index>` its head count; `T` the offsets (ms) of head additions after the last full
 * write, within the shortest slot (they date the heads' latest grants for every ring at once).
 */
export function packedItemBound(
  specs: readonly RingSpec[],
  validityMs: number,
  reservationsKeyLength = 0,
): number {
  const receiptSeconds = Math.ceil((2 * validityMs + GIVE_BACK_SLACK_MS) / 1000) + 1;
  const scopes = new Set(specs.map((spec) => spec.scope));
  const maxSpanMs = Math.max(...specs.map((spec) => spec.spanMs));
  const maxLimit = Math.max(...specs.map((spec) => spec.limit));
  let packed =
    1 +
    varintBytes(scopes.size) +
    [...scopes].reduce((sum, scope) => sum + 1 + scope.length, 0) +
    varintBytes(specs.length) +
    (1 +
      capLimits(specs).reduce(
        (sum, spec) =>
          sum +
          varintBytes(scopes.size) +
          varintBytes(spec.windowMs % 1000 === 0 ? spec.windowMs / 500 : 2 * spec.windowMs + 1) +
          varintBytes(maxLimit) +
          varintBytes(Math.ceil(maxSpanMs / CAP_UNTIL_MS)),
        0,
      )) +
    (1 + CARRIED_WRITE_IDS * 4) +
    (1 + SPENT_LIMIT * (varintBytes(receiptSeconds) + 3));
  let heads = 0;
  specs.forEach((spec, index) => {
    const { older, extra } = ringFill(spec);
    const thresholds: number[] = [];
    for (let bytes = 1; bytes < 8 && 128 ** bytes <= spec.limit * 36; bytes++)
      thresholds.push(Math.ceil(128 ** bytes / 36));
    packed +=
      varintBytes(scopes.size) +
      varintBytes(spec.windowMs) +
      varintBytes(spec.slots) +
      varintBytes(older) +
      older +
      extra(thresholds);
    heads += 1 + base36Digits(index + 1) + numberBytes(spec.limit);
  });
  const offsets = 1 + WRITE_IDS_LIMIT * numberBytes(Math.min(...specs.map((spec) => spec.slotMs)) - 1);
  return (
    FIXED_BYTES + (1 + 1) + (2 + packed) + heads + offsets + idBytes(reservationsKeyLength) + CLAIM_BYTES
  );
}

/** Whether a learned class is held to the probe in this plan: nothing of its limits is learned (in force) yet. */
export const isProbing = (plan: LimitPlan, cls: string): boolean =>
  plan.learned.has(cls) &&
  (plan.classes.get(cls) ?? []).some(
    (spec) => spec.limit === PROBE_LIMIT.limit && spec.windowSeconds === PROBE_LIMIT.windowSeconds,
  );
