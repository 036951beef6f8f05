import { createHash } from 'node:crypto';
import type { RateLimit, RateLimitSettings } from '../config/rate-limits.js';
import { ConfigurationError } from '../errors.js';
import { chooseItemFormat } from './item/bound.js';
import {
  LONGEST_LEARNED_WINDOW,
  MAX_LEARNED_LIMIT,
  MIN_LEARNED_WINDOWS,
  PROBE_LIMIT,
} from './learned-limits.js';
import {
  CLASS_SLOTS_PER_WINDOW,
  GENERAL_SCOPE,
  type ItemFormat,
  type LearnedRings,
  type LimitPlan,
  RESERVATIONS_KEY_LENGTH,
  type ReservedWindow,
  type RingSpec,
  reservedScope,
  ringKey,
  ringLength,
  SHARED_SCOPE,
  SLOTS_PER_WINDOW,
  slotMsFor,
} from './ring-plan.js';

export * from './ring-plan.js';

/** Request classes per credential set (each adds rings to the one ledger item; see ITEM_BYTES_BUDGET). */
export const MAX_CLASSES = 4;
/**
 * A permit may be sent until the end of its validity; the margin the rings are widened by must also hold the
 * request's trip from the consumer to the vendor after that moment and the clocks' disagreement. So the
 * validity must leave at least this share of the margin free (2 s of 3 s by default leaves 1 s).
 */
export const MIN_SLACK_FRACTION = 0.2;
/** Reserved consumers per credential set: each adds a ring per window it holds a reservation in. */
export const MAX_RESERVED_CONSUMERS = 10;
/** Per window, reservations leave at least this share of the limit (rounded up) to be shared. */
export const MIN_SHARED_FRACTION = 0.1;
const CONSUMER_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const CLASS_NAME = /^[a-z][a-z0-9-]*$/;

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
  const specs = (scope: string, limits: unknown, path: string, slots = SLOTS_PER_WINDOW): RingSpec[] =>
    ringSpecs(scope, limits, path, slots, marginMs, fail);
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
  const classesIn = (format: ItemFormat, worst: number | 'learned' = MIN_LEARNED_WINDOWS) => {
    const classes = new Map<string, RingSpec[]>();
    for (const [name, limits] of Object.entries(settings.classes ?? {})) {
      if (!CLASS_NAME.test(name)) fail('class names must be lowercase letters, digits and dashes');
      const slots = format === 2 ? CLASS_SLOTS_PER_WINDOW : SLOTS_PER_WINDOW;
      if (!learned.has(name)) classes.set(name, specs(name, limits, `classes.${name}`, slots));
      else {
        const ring = learnedLimits(learnedRings, name, worst);
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
  const { itemFormat, learnedWindows, sized, itemBytesBound } = chooseItemFormat({
    ringsIn,
    classesIn,
    reservations: reserved.size > 0,
    reservationsKeyLength: reservationsKey.length,
    validityMs,
    asked: settings.itemFormat,
    learned: learned.size > 0,
    fail,
  });
  const classes = learned.size === 0 ? sized : classesIn(itemFormat, 'learned');
  const all = [...ringsIn(classes), ...ringsIn(sized)];
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

/** The rings of a list of limits of one scope (validated: `path` names the list in the settings). */
function ringSpecs(
  scope: string,
  limits: unknown,
  path: string,
  slots: number,
  marginMs: number,
  fail: (message: string) => never,
): RingSpec[] {
  if (!Array.isArray(limits) || limits.length === 0) fail(`${path} must be a non-empty list of limits`);
  return (limits as RateLimitSettings['general']).map((entry, index) => {
    const { limit, windowSeconds } = entry ?? {};
    if (!Number.isSafeInteger(limit) || limit < 1) fail(`${path}[${index}].limit must be an integer ≥ 1`);
    const windowMs = Math.round(windowSeconds * 1000);
    if (!Number.isFinite(windowSeconds) || windowMs < 1) fail(`${path}[${index}].windowSeconds must be > 0`);
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
}

/**
 * A learned class's rings: as learned (the probe until then); `worst` (a number of windows): the most it may ever
 * hold, for sizing the item: the probe (its ring lingers while the class is used, rule M3) and that many limits
 * of MAX_LEARNED_LIMIT over the longest learned windows.
 */
const learnedLimits = (
  learnedRings: LearnedRings | undefined,
  name: string,
  worst: number | 'learned',
): RateLimit[] =>
  worst !== 'learned'
    ? [
        PROBE_LIMIT,
        ...Array.from({ length: worst }, (_, i) => ({
          limit: MAX_LEARNED_LIMIT,
          windowSeconds: LONGEST_LEARNED_WINDOW - i,
        })),
      ]
    : [...(learnedRings?.[name] ?? [PROBE_LIMIT])];

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

/** Whether a learned class is held to the probe in this plan: nothing of its limits is learned (in force) yet. */
export const isProbing = (plan: LimitPlan, cls: string): boolean =>
  plan.learned.has(cls) &&
  (plan.classes.get(cls) ?? []).some(
    (spec) => spec.limit === PROBE_LIMIT.limit && spec.windowSeconds === PROBE_LIMIT.windowSeconds,
  );
