import { InvalidLedgerRequestError } from './errors.js';
import type { LimitPlan, ReservedWindow, RingSpec } from './ring-plan.js';

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
  /**
   * The lease item's version this share answers to (issue 33): an adoption replaces a share only if at least as
   * new (adoptionOf). Kept beside `rs` in its own attribute (`rsv`, encodeShareVersion): release N-1 reads `rs`
   * with a strict pattern and never sees it. Absent: a share adopted without one (by N-1's renewer, or a test).
   */
  version?: number;
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
  const { limits, fenceAt, floor, home, version, ...unknown } = share as Record<string, unknown>;
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
  if (version !== undefined) {
    if (!isCount(version)) fail('version must be an integer ≥ 0');
    checked.version = version as number;
  }
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

/** Whether two shares say the same, their versions too (adopting the second changes nothing). */
export const sameShare = (a: RegionShare | undefined, b: RegionShare | undefined): boolean =>
  a !== undefined && b !== undefined && encodeShare(a) === encodeShare(b) && a.version === b.version;

/**
 * How an adoption changes the share held (DynamoRateLedger.adoptShare, on the item as the write finds it):
 * - `replace` (after the lease write was acknowledged): the share of that record, with its version, replaces the
 *   held one unless the held one is newer: a later version, or (where either has none) a later fence;
 * - `cap` (before the lease write): every ring the held share names is lowered to at most the wanted limit (0
 *   where the wanted share does not name it: a ring of another learned view), the fence to at most the wanted
 *   fence, floor and home stay, and the held version rises to the wanted one (never falls). A cap is safe whatever
 *   it meets: it only lowers.
 */
export type AdoptionMode = 'replace' | 'cap';

export interface Adoption {
  /**
   * `adopted`: the share changed; `unchanged`: it said that already (a repeat, or a re-send after a lost answer);
   * `stale`: a replace older than the share held (a slow renewal overtaken by a newer one), which stays.
   */
  outcome: 'adopted' | 'unchanged' | 'stale';
  /** The share held afterwards. */
  share: RegionShare;
}

/**
 * Monotone in the lease record (issue 33, docs/multi-region.md "Adoption"): a renewal stamps the share with the
 * version its lease write will give the item (read version + 1) BEFORE it writes (`cap`), and adopts the record's
 * share with that version after (`replace`). So once a renewal has capped, no adoption of an older record (a slow
 * run's) can raise the share again, and the share held is at most what the Region's latest record says. A
 * failed lease write leaves the stamp one above the version read: any later write of this Region gives the item
 * at least that version, so the next good record is adopted.
 */
export function adoptionOf(held: RegionShare | undefined, wanted: RegionShare, mode: AdoptionMode): Adoption {
  if (mode === 'cap') {
    const base: RegionShare = held ?? { limits: {}, fenceAt: 0 };
    // A ring the record to be written does not name goes to 0: the other Region reads that record, and a ring it
    // does not name may be bounded there only by a shorter ring of its class (lease.ts tailOf) that a plan on
    // another learned view does not check (two renewer runs on views a cache apart, issue 33's property test).
    const limits: Record<string, number> = {};
    for (const [key, limit] of Object.entries(base.limits))
      limits[key] = Math.min(limit, wanted.limits[key] ?? 0);
    const version = wanted.version === undefined ? base.version : Math.max(wanted.version, base.version ?? 0);
    // The fence too, should the record to be written end sooner (a renewer whose clock reads a little behind the
    // last one's): the ledger never fences later than its Region's latest record says.
    const fenceAt = Math.min(base.fenceAt, wanted.fenceAt);
    const capped: RegionShare = { ...base, limits, fenceAt, ...(version === undefined ? {} : { version }) };
    // No share and no stamp: nothing to write (an item without a share grants the floor, as an empty one would).
    const same = held === undefined ? version === undefined : sameShare(held, capped);
    return { outcome: same ? 'unchanged' : 'adopted', share: capped };
  }
  if (held) {
    const stamped = held.version !== undefined && wanted.version !== undefined;
    const older = stamped
      ? (wanted.version as number) < (held.version as number)
      : wanted.fenceAt < held.fenceAt;
    if (older) return { outcome: 'stale', share: held };
  }
  if (sameShare(held, wanted)) return { outcome: 'unchanged', share: wanted };
  return { outcome: 'adopted', share: wanted };
}

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

/**
 * The item's `rsv` attribute: `<version>;<fenceAt>` in base 36, the version of the share in `rs` and the fence it
 * was stamped with. A share adopted since by a release that does not stamp (N-1 leaves `rsv` as it is) has
 * another fence: the stamp is then not its own, and the share is read as unstamped (decodeShareVersion).
 */
export const encodeShareVersion = (share: RegionShare): string | undefined =>
  share.version === undefined ? undefined : `${share.version.toString(36)};${share.fenceAt.toString(36)}`;

const VERSION_TEXT = /^([0-9a-z]{1,11});([0-9a-z]{1,11})$/;

/**
 * The version `rsv` gives the share `rs` holds, or undefined: when it is missing, stamped on another fence, or
 * not one (a stamp only ever refuses an adoption, so one that cannot be read is no stamp: the fence decides, as
 * before stamps).
 */
export function decodeShareVersion(text: string | undefined, share: RegionShare): number | undefined {
  const match = text === undefined ? null : VERSION_TEXT.exec(text);
  if (!match?.[1] || !match[2]) return undefined;
  const version = Number.parseInt(match[1], 36);
  return isCount(version) && Number.parseInt(match[2], 36) === share.fenceAt ? version : undefined;
}

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
