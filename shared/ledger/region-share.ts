import { InvalidLedgerRequestError } from './errors.js';
import type { LimitPlan, ReservedWindow, RingSpec } from './limit-plan.js';

/**
 * A Region's share of its ledger key's budgets (issue 27, docs/multi-region.md), adopted into its regional
 * ledger item by the lease renewer (DynamoRateLedger.adoptShare). While the ledger time is before `fenceAt`, each
 * ring is held to min(configured limit, limits[ring key]); from `fenceAt` on (the lease lapsed unrenewed), to
 * its floor. A general or class ring the share does not name is held to its floor too: a ring nobody leased
 * (a class added after the share was computed) must not be granted in full in both Regions.
 */
export interface RegionShare {
  /** By ring key (RingSpec.key): the most this Region may grant in any span of that ring. */
  limits: Record<string, number>;
  /** Ledger time (epoch ms) from which only the floor is granted, unless a renewal moves it. */
  fenceAt: number;
  /** By ring key: what is granted from `fenceAt` on (and in a ring the share does not name); default 0. */
  floor?: Record<string, number>;
  /**
   * Consumers homed in this Region: their reservations hold here, within the share of the window (the shared
   * part gets what the share leaves beside them). A reserved consumer homed elsewhere has no reservation here
   * (its ring is held to 0): it is served from the shared part, as a consumer without a reservation is.
   */
  home?: string[];
}

/** No share in the item of a ledger that needs one (a Region of two, before its first lease): floor only. */
export const NO_SHARE: RegionShare = { limits: {}, fenceAt: 0 };

const RING_KEY = /^[a-z*~@][a-z0-9-]*\/[0-9a-z]+(?:\.[0-9a-z]+)?$/;
const CONSUMER = /^[a-z0-9][a-z0-9-]{0,62}$/;
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

/**
 * The share a caller asks to adopt, checked against the plan: a general or class ring key of the plan (or of a
 * learned class: its rings change as it learns) for each limit and floor, counts ≥ 0, a time, known consumer
 * names. Bad input is refused whole (InvalidLedgerRequestError), before anything is read or written.
 */
export function checkShare(share: unknown, plan: LimitPlan): RegionShare {
  const fail = (message: string): never => {
    throw new InvalidLedgerRequestError(`share: ${message}`);
  };
  if (!share || typeof share !== 'object') return fail('must be an object');
  const { limits, fenceAt, floor, home, ...unknown } = share as Record<string, unknown>;
  const extra = Object.keys(unknown);
  if (extra.length > 0) fail(`unknown field ${extra[0]}`);
  if (!isCount(fenceAt)) fail('fenceAt must be a time in epoch ms');
  const leased = new Set(
    [...plan.general, ...[...plan.classes.values()].flat()].map((spec: RingSpec) => spec.key),
  );
  const counts = (value: unknown, name: string): Record<string, number> => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return fail(`${name} must be an object`);
    for (const [key, count] of Object.entries(value)) {
      const scope = key.slice(0, key.lastIndexOf('/'));
      if (!RING_KEY.test(key) || !(leased.has(key) || plan.learned.has(scope)))
        fail(`${name}: "${key.slice(0, 80)}" is not a general or class ring of these rate limits`);
      if (!isCount(count)) fail(`${name}.${key} must be an integer ≥ 0`);
    }
    return { ...(value as Record<string, number>) };
  };
  const checked: RegionShare = { limits: counts(limits, 'limits'), fenceAt: fenceAt as number };
  if (floor !== undefined) checked.floor = counts(floor, 'floor');
  if (home !== undefined) {
    const reserved = new Set([...plan.reserved.values()].flatMap((window) => [...window.reserved.keys()]));
    if (!Array.isArray(home) || !home.every((name) => typeof name === 'string' && CONSUMER.test(name)))
      fail('home must be a list of consumer names');
    const strange = (home as string[]).find((name) => !reserved.has(name));
    if (strange !== undefined) fail(`home: "${strange}" holds no reservation in these rate limits`);
    checked.home = [...new Set(home as string[])].sort();
  }
  return checked;
}

/** Whether two shares say the same (adopting the second changes nothing). */
export const sameShare = (a: RegionShare | undefined, b: RegionShare | undefined): boolean =>
  a !== undefined && b !== undefined && encodeShare(a) === encodeShare(b);

/**
 * The item's `rs` attribute (ledger-item.ts): `<fenceAt>;<ring key>=<limit>[:<floor>],...[;<home>,...]`, numbers in
 * base 36, keys sorted: about 10 bytes a ring, so that the item stays within its write unit.
 */
export function encodeShare(share: RegionShare): string {
  const keys = [...new Set([...Object.keys(share.limits), ...Object.keys(share.floor ?? {})])].sort();
  const rings = keys.map((key) => {
    const limit = share.limits[key];
    const floor = share.floor?.[key];
    return `${key}=${limit === undefined ? '' : limit.toString(36)}${floor ? `:${floor.toString(36)}` : ''}`;
  });
  const home = share.home?.length ? `;${share.home.join(',')}` : '';
  return `${share.fenceAt.toString(36)};${rings.join(',')}${home}`;
}

const SHARE_TEXT =
  /^([0-9a-z]+);((?:[a-z*~@][a-z0-9-]*\/[0-9a-z.]+=[0-9a-z]*(?::[0-9a-z]+)?)(?:,[a-z*~@][a-z0-9-]*\/[0-9a-z.]+=[0-9a-z]*(?::[0-9a-z]+)?)*)?(?:;([a-z0-9,-]+))?$/;

/** The share `rs` holds, or undefined where the text is not one (the caller fails closed: state-codec.ts). */
export function decodeShare(text: string): RegionShare | undefined {
  const match = SHARE_TEXT.exec(text);
  if (!match?.[1]) return undefined;
  const share: RegionShare = { limits: {}, fenceAt: Number.parseInt(match[1], 36) };
  for (const part of match[2] ? match[2].split(',') : []) {
    const [key = '', counts = ''] = part.split('=');
    const [limit = '', floor] = counts.split(':');
    if (limit !== '') share.limits[key] = Number.parseInt(limit, 36);
    if (floor !== undefined) {
      share.floor ??= {};
      share.floor[key] = Number.parseInt(floor, 36);
    }
  }
  if (match[3]) share.home = match[3].split(',');
  if (
    !isCount(share.fenceAt) ||
    ![share.limits, share.floor ?? {}].every((r) => Object.values(r).every(isCount))
  )
    return undefined;
  return share;
}

const held = new WeakMap<LimitPlan, { key: string; plan: LimitPlan }>();

/**
 * The plan a grant is decided on under `share` at ledger time g: the same rings, each limit lowered to what the
 * share (or after `fenceAt`, the floor) leaves this Region, and a reserved window's general ring checked too
 * (`checkReserved`), so that the window holds the share whatever its parts say. Its parts: a reservation of a
 * consumer homed here keeps min(its limit, the window's share), one homed elsewhere is held to 0, the shared part
 * gets min(its limit, the window's share less the home reservations). Without a share: the plan itself.
 * The last plan per base plan is kept: a batch decides every op of a share on the same object.
 */
export function heldPlan(plan: LimitPlan, share: RegionShare | undefined, g: number): LimitPlan {
  if (share === undefined) return plan;
  const fenced = g >= share.fenceAt;
  const key = `${fenced}|${encodeShare(share)}`;
  const cached = held.get(plan);
  if (cached?.key === key) return cached.plan;
  const floorOf = (spec: RingSpec) => share.floor?.[spec.key] ?? 0;
  const allowed = (spec: RingSpec): number =>
    Math.min(spec.limit, fenced ? floorOf(spec) : (share.limits[spec.key] ?? floorOf(spec)));
  const lower = (spec: RingSpec, limit: number): RingSpec => ({ ...spec, limit: Math.max(0, limit) });
  const general = plan.general.map((spec) => lower(spec, allowed(spec)));
  const classes = new Map(
    [...plan.classes].map(([cls, specs]) => [cls, specs.map((s) => lower(s, allowed(s)))]),
  );
  const home = new Set(share.home ?? []);
  const reserved = new Map<string, ReservedWindow>();
  for (const [generalKey, window] of plan.reserved) {
    const spec = general.find((candidate) => candidate.key === generalKey);
    const windowShare = spec?.limit ?? 0;
    const parts = new Map<string, RingSpec>();
    let homed = 0;
    for (const [consumer, own] of window.reserved) {
      const limit = home.has(consumer) ? Math.min(own.limit, windowShare) : 0;
      homed += limit;
      parts.set(consumer, lower(own, limit));
    }
    reserved.set(generalKey, {
      shared: lower(window.shared, Math.min(window.shared.limit, windowShare - homed)),
      reserved: parts,
    });
  }
  const result: LimitPlan = { ...plan, general, classes, reserved, checkReserved: true };
  held.set(plan, { key, plan: result });
  return result;
}
