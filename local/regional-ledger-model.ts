import type { RingSpec } from '../shared/ledger/limit-plan.js';
import {
  type Adoption,
  type AdoptionMode,
  adoptionOf,
  type RegionShare,
} from '../shared/ledger/region-share.js';
import { emptyRing, type Ring, recordGrant, shiftRing, slotIndex, usedAt } from '../shared/ledger/ring.js';
import type { RingSnapshot } from '../shared/ledger/ring-snapshot.js';

/**
 * A Region's regional ledger as the simulation runs it: the real ledger's rings (shared/ledger/ring.ts, the same
 * slots, sub-slots and spans, so a grant fits exactly when the DynamoDB ledger's would), held to the share the
 * Region adopted per ring and, after its fence (its own clock), to the floor; shares adopted by the real ledger's
 * rule (region-share.ts adoptionOf: a replace of an older version refused, a cap lowers and stamps). The general
 * rings only: classes and reservations are held to their shares by the same rule. No lease-store handle: the
 * grant path cannot call it.
 */
export class RegionalLedgerModel {
  readonly #specs: readonly RingSpec[];
  #rings: Ring[];
  #head: number | undefined;
  /** Undefined before the first adoption: the floor only. */
  #share: RegionShare | undefined;
  readonly #floor: number;

  /** Starts fenced (no share): a Region grants nothing beyond the floor before its first lease. */
  constructor(specs: readonly RingSpec[], floor = 0) {
    this.#specs = specs;
    this.#rings = specs.map(() => emptyRing());
    this.#share = undefined;
    this.#floor = floor;
  }

  get shares(): Record<string, number> {
    return Object.fromEntries(this.#specs.map((s) => [s.key, this.#share?.limits[s.key] ?? 0]));
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
      (spec, i) => usedAt(spec, this.#rings[i] as Ring, now) + count <= this.limitAt(spec, now),
    );
    if (!fits) return false;
    this.#rings.forEach((ring, i) => {
      recordGrant(ring, (this.#specs[i] as RingSpec).slotMs, now, count);
    });
    return true;
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

  /** snapshot of the contract: every slot with grants, with its start time, at the item's time (g = max(now, head)). */
  snapshot(now: number): RingSnapshot {
    this.#advance(now);
    const head = Math.max(this.#head ?? now, now);
    const rings: RingSnapshot['rings'] = {};
    this.#specs.forEach((spec, i) => {
      const headSlot = slotIndex(head, spec.slotMs);
      const slots = (this.#rings[i] as Ring).counts
        .map((count, j) => ({ start: (headSlot - j) * spec.slotMs, count }))
        .filter((slot) => slot.count > 0);
      rings[spec.key] = { windowMs: spec.windowMs, slotMs: spec.slotMs, slots };
    });
    return { at: head, rings };
  }

  #advance(now: number): void {
    if (this.#head !== undefined && now <= this.#head) return;
    const from = this.#head ?? now;
    this.#rings = this.#rings.map((ring, i) => {
      const spec = this.#specs[i] as RingSpec;
      // Within one slot the ring is as it was (shiftRing would copy it for nothing: the simulation's hot path).
      if (slotIndex(from, spec.slotMs) === slotIndex(now, spec.slotMs)) return ring;
      return shiftRing(ring, spec.slotMs, from, now, spec.length);
    });
    this.#head = now;
  }
}
