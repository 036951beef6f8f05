import { seedLearnedRing, type TaughtLimit } from '../shared/ledger/learned-rings.js';
import { acquire, emptyState, type LedgerState } from '../shared/ledger/ledger-state.js';
import { type LimitPlan, parseRingKey, type RingSpec, ringLength } from '../shared/ledger/limit-plan.js';
import {
  type Adoption,
  type AdoptionMode,
  adoptionOf,
  heldPlan,
  NO_SHARE,
  type RegionShare,
} from '../shared/ledger/region-share.js';
import {
  emptyRing,
  isEmptyRing,
  type Ring,
  recordGrant,
  shiftRing,
  slotIndex,
  usedAt,
} from '../shared/ledger/ring.js';
import { type RingSnapshot, ringSnapshotOf } from '../shared/ledger/ring-snapshot.js';

/**
 * A Region's regional ledger as the simulation runs it: the real ledger's rings (shared/ledger/ring.ts, the same
 * slots, sub-slots and spans, so a grant fits exactly when the DynamoDB ledger's would), held to the share the
 * Region adopted per ring and, after its fence (its own clock), to the floor; shares adopted by the real ledger's
 * rule (region-share.ts adoptionOf: a replace of an older version refused, a cap lowers and stamps). A general ask
 * is decided here on the general rings (the hot path); a class's ask by the real ledger's own decision
 * (ledger-state.ts acquire) on the plan of the Region's learned view held to the share (region-share.ts
 * heldPlan), on the same rings: it counts in every ring of its class the item holds (rule 1 of
 * docs/class-limits.md, "Processes that disagree"), and a learned ring is seeded by the real ledger's rules: by
 * the report in the Region that took it (seedLearnedRing), from the learned item's seed in the other (acquire's
 * seedFromLearned). Reservations are not modelled. No lease-store handle: the grant path cannot call it.
 */
export class RegionalLedgerModel {
  readonly #specs: readonly RingSpec[];
  /** By ring key, as the item keeps them (an empty ring goes, as stateAt drops it). */
  readonly #rings = new Map<string, Ring>();
  /** By ring key: its slot length and how many slots it keeps. */
  readonly #shapes = new Map<string, { slotMs: number; length: number }>();
  readonly #marginMs: number;
  #head: number | undefined;
  /** Undefined before the first adoption: the floor only. */
  #share: RegionShare | undefined;
  readonly #floor: number;
  /** LedgerState.learnedVersion: the report's write, or a seed from the learned item (seedFromLearned), set it. */
  #learnedVersion = 0;

  /** Starts fenced (no share): a Region grants nothing beyond the floor before its first lease. */
  constructor(specs: readonly RingSpec[], floor = 0) {
    this.#specs = specs;
    this.#marginMs = (specs[0] as RingSpec).spanMs - (specs[0] as RingSpec).windowMs;
    this.#share = undefined;
    this.#floor = floor;
  }

  /** The share held per general ring (0 where none), and per class ring it names. */
  get shares(): Record<string, number> {
    return {
      ...this.#share?.limits,
      ...Object.fromEntries(this.#specs.map((s) => [s.key, this.#share?.limits[s.key] ?? 0])),
    };
  }

  get fenceAt(): number {
    return this.#share?.fenceAt ?? Number.NEGATIVE_INFINITY;
  }

  /** The share held (undefined: none yet). */
  get share(): RegionShare | undefined {
    return this.#share;
  }

  /** What each ring may hold at `now`: min(limit, share) before the fence, the floor after. */
  limitAt(spec: RingSpec, now: number): number {
    const share = this.#share;
    if (!share || now >= share.fenceAt) return Math.min(spec.limit, this.#floor);
    return Math.min(spec.limit, share.limits[spec.key] ?? this.#floor);
  }

  /** One ask of `count` at `now` (its clock, never earlier than its last): all of it or nothing, like the ledger. */
  grant(now: number, count = 1): boolean {
    this.#advance(now);
    const fits = this.#specs.every(
      (spec) =>
        usedAt(spec, this.#rings.get(spec.key) ?? emptyRing(), now) + count <= this.limitAt(spec, now),
    );
    if (!fits) return false;
    for (const spec of this.#specs) {
      const ring = this.#rings.get(spec.key) ?? emptyRing();
      recordGrant(ring, spec.slotMs, now, count);
      this.#rings.set(spec.key, ring);
    }
    return true;
  }

  /**
   * One ask of class `cls` at `now`, decided as the regional DynamoDB ledger decides it: `plan` (the Region's
   * learned view, learned-reports.ts planIn) held to the share (heldPlan: a ring the share does not name, and
   * every ring from the fence on, to the floor 0), by ledger-state.ts acquire on the item's rings.
   */
  grantClass(now: number, plan: LimitPlan, cls: string): boolean {
    const g = this.#advance(now);
    const state = this.#state(g);
    const granted = acquire(state, this.#held(plan, g), g, 1, cls).granted;
    this.#keep(state);
    return granted;
  }

  /**
   * A report taught a learned ring of `cls` (`windowSeconds`): seeded as the real ledger seeds it
   * (learned-rings.ts seedLearnedRing) with `counted`, the vendor's `limit - remaining`, and the class's grants
   * in flight that this item's rings hold; the item then holds grants of the learned view `version` (the report's
   * write sets it, dynamo-ledger.ts). Whether it recorded any.
   */
  seedLearned(
    now: number,
    plan: LimitPlan,
    cls: string,
    windowSeconds: number,
    counted: number,
    taught: readonly TaughtLimit[],
    version = 0,
  ): boolean {
    const g = this.#advance(now);
    const state = this.#state(g);
    const seeded = seedLearnedRing(state, plan, g, cls, windowSeconds, counted, taught);
    state.learnedVersion = Math.max(state.learnedVersion, version);
    this.#keep(state);
    return seeded;
  }

  /** heldPlan of the share held, kept while the plan, the share and which side of the fence g is on stay. */
  #heldCache:
    | { plan: LimitPlan; share: RegionShare | undefined; fenced: boolean; held: LimitPlan }
    | undefined;

  #held(plan: LimitPlan, g: number): LimitPlan {
    const share = this.#share ?? NO_SHARE;
    const fenced = g >= share.fenceAt;
    const cached = this.#heldCache;
    if (cached && cached.plan === plan && cached.share === this.#share && cached.fenced === fenced)
      return cached.held;
    const held = heldPlan(plan, share, g);
    this.#heldCache = { plan, share: this.#share, fenced, held };
    return held;
  }

  /** The item's state at `now` (its rings moved there) as ledger-state.ts sees it; the rings are this model's. */
  #state(now: number): LedgerState {
    return {
      ...emptyState(1),
      time: now,
      rings: this.#rings,
      learnedVersion: this.#learnedVersion,
      ...(this.#share ? { share: this.#share } : {}),
    };
  }

  /** Rings the state's operations added, and dropped (boundClassRings), stay so. */
  #keep(state: LedgerState): void {
    this.#learnedVersion = state.learnedVersion;
    for (const key of state.rings.keys()) this.#shapeOf(key);
  }

  #shapeOf(key: string): { slotMs: number; length: number } {
    let shape = this.#shapes.get(key);
    if (!shape) {
      const { windowMs, slotMs } = parseRingKey(key);
      shape = { slotMs, length: ringLength(windowMs, this.#marginMs, slotMs) };
      this.#shapes.set(key, shape);
    }
    return shape;
  }

  /**
   * adoptShare of the contract: the shares and the fence at once (one conditional write on the item), by the
   * ledger's rule. Without a version and in `replace` mode: adopted unless the fence is older (the rule of old).
   */
  adoptShare(
    shares: Record<string, number>,
    fenceAt: number,
    options: { version?: number; mode?: AdoptionMode } = {},
  ): Adoption {
    const wanted: RegionShare = {
      limits: { ...shares },
      fenceAt,
      ...(options.version === undefined ? {} : { version: options.version }),
    };
    const adoption = adoptionOf(this.#share, wanted, options.mode ?? 'replace');
    if (adoption.outcome === 'adopted') this.#share = adoption.share;
    return adoption;
  }

  /**
   * snapshot of the contract: every slot with grants, with its start time, at the item's time (g = max(now, head)):
   * the real ledger's (ring-snapshot.ts ringSnapshotOf), every ring of `plan` (the general rings if none is given)
   * and every other ring the item holds.
   */
  snapshot(now: number, plan?: LimitPlan): RingSnapshot {
    const head = this.#advance(now);
    const of =
      plan ?? ({ general: this.#specs, classes: new Map(), reserved: new Map() } as unknown as LimitPlan);
    return ringSnapshotOf(this.#state(head), of, head);
  }

  /** Moves the rings to `now` (never back): the item's time, g = max(now, head). */
  #advance(now: number): number {
    if (this.#head !== undefined && now <= this.#head) return this.#head;
    const from = this.#head ?? now;
    for (const [key, ring] of this.#rings) {
      const { slotMs, length } = this.#shapeOf(key);
      // Within one slot the ring is as it was (shiftRing would copy it for nothing: the simulation's hot path).
      if (slotIndex(from, slotMs) === slotIndex(now, slotMs)) continue;
      const moved = shiftRing(ring, slotMs, from, now, length);
      if (isEmptyRing(moved)) this.#rings.delete(key);
      else this.#rings.set(key, moved);
    }
    this.#head = now;
    return now;
  }
}
