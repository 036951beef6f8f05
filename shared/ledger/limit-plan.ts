import type { RateLimitSettings } from '../config/credential-sets.js';
import { ConfigurationError } from '../errors.js';

/**
 * How the rate-limit settings of a credential set become rings of slot counters.
 * A limit "L per W" gets a ring of slots of W/60 covering W + D (D = marginSeconds): a permit granted at g may
 * be sent until g + V (V ≤ D), so any send span of length W only holds grants of a grant span of W + D.
 */
export const SLOTS_PER_WINDOW = 60;
/** Each slot also keeps the 1/36th part of it that holds its latest grant, so a slot frees almost on time. */
export const SUB_SLOTS = 36;
export const GENERAL_SCOPE = '*';
const CLASS_NAME = /^[a-z][a-z0-9-]*$/;

export interface RingSpec {
  /** `<scope>/<window ms, base 36>`: names the ring in the stored item. */
  key: string;
  /** GENERAL_SCOPE or a class name. */
  scope: string;
  limit: number;
  windowSeconds: number;
  windowMs: number;
  slotMs: number;
  /** W + D: the grant span in which at most `limit` grants may fall. */
  spanMs: number;
  /** Slots kept: every slot that can intersect a span ending at or after the newest slot. */
  length: number;
}

export interface LimitPlan {
  general: RingSpec[];
  classes: ReadonlyMap<string, RingSpec[]>;
  marginMs: number;
  validityMs: number;
  /** The longest span of any ring. */
  maxSpanMs: number;
  /** How long after its last full write the state still matters: grants go up to a slot later, then span. */
  retainMs: number;
}

export const slotMsFor = (windowMs: number): number => Math.max(1, Math.floor(windowMs / SLOTS_PER_WINDOW));
export const ringKey = (scope: string, windowMs: number): string => `${scope}/${windowMs.toString(36)}`;
export const ringLength = (windowMs: number, marginMs: number): number =>
  Math.ceil((windowMs + marginMs) / slotMsFor(windowMs)) + 1;

const plans = new WeakMap<RateLimitSettings, LimitPlan>();

/** The plan for a settings object, validated once and then cached (settings are parsed once at cold start). */
export function planFor(settings: RateLimitSettings): LimitPlan {
  const cached = plans.get(settings);
  if (cached) return cached;
  const plan = compile(settings);
  plans.set(settings, plan);
  return plan;
}

/** The rings a permit of `cls` counts against: the general ones, then the class's. */
export function ringsFor(plan: LimitPlan, cls: string | undefined): RingSpec[] {
  if (cls === undefined) return plan.general;
  return [...plan.general, ...(plan.classes.get(cls) ?? [])];
}

function compile(settings: RateLimitSettings): LimitPlan {
  const fail = (message: string): never => {
    throw new ConfigurationError(`rate limit settings: ${message}`);
  };
  if (!settings || typeof settings !== 'object') fail('missing');
  const { marginSeconds, permitValiditySeconds } = settings;
  if (!Number.isFinite(marginSeconds) || marginSeconds < 0) fail('marginSeconds must be a number ≥ 0');
  if (!Number.isFinite(permitValiditySeconds) || permitValiditySeconds <= 0)
    fail('permitValiditySeconds must be a number > 0');
  // The bound holds only if every permit is sent inside the margin the rings were widened by.
  if (permitValiditySeconds > marginSeconds) fail('permitValiditySeconds must not exceed marginSeconds');
  const marginMs = Math.round(marginSeconds * 1000);
  const specs = (scope: string, limits: unknown, path: string): RingSpec[] => {
    if (!Array.isArray(limits) || limits.length === 0) fail(`${path} must be a non-empty list of limits`);
    return (limits as RateLimitSettings['general']).map((entry, index) => {
      const { limit, windowSeconds } = entry ?? {};
      if (!Number.isSafeInteger(limit) || limit < 1) fail(`${path}[${index}].limit must be an integer ≥ 1`);
      const windowMs = Math.round(windowSeconds * 1000);
      if (!Number.isFinite(windowSeconds) || windowMs < 1)
        fail(`${path}[${index}].windowSeconds must be > 0`);
      const slotMs = slotMsFor(windowMs);
      return {
        key: ringKey(scope, windowMs),
        scope,
        limit,
        windowSeconds,
        windowMs,
        slotMs,
        spanMs: windowMs + marginMs,
        length: ringLength(windowMs, marginMs),
      };
    });
  };
  const general = specs(GENERAL_SCOPE, settings.general, 'general');
  const classes = new Map<string, RingSpec[]>();
  for (const [name, limits] of Object.entries(settings.classes ?? {})) {
    if (!CLASS_NAME.test(name)) fail('class names must be lowercase letters, digits and dashes');
    classes.set(name, specs(name, limits, `classes.${name}`));
  }
  const all = [...general, ...[...classes.values()].flat()];
  return {
    general,
    classes,
    marginMs,
    validityMs: Math.round(permitValiditySeconds * 1000),
    maxSpanMs: Math.max(...all.map((spec) => spec.spanMs)),
    retainMs: Math.max(...all.map((spec) => spec.spanMs + spec.slotMs)),
  };
}
