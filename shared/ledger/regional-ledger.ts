import type { RateLimitSettings } from '../config/rate-limits.js';
import { DynamoRateLedger } from './dynamo-ledger.js';
import { adoptShare, checkTokenId } from './operations/index.js';
import { type Adoption, type AdoptionMode, checkShare, type RegionShare } from './region-share.js';
import type { LimitPlan } from './ring-plan.js';
import { type RingSnapshot, ringSnapshotOf } from './ring-snapshot.js';

/** What adoptShare did: the share in the item afterwards is `share`. */
export interface AdoptShareResult extends Adoption {
  /**
   * The item's rings at the adoption (its ledger time): after a cap, every later grant is held to it, so this is
   * the snapshot a lease record written next may carry (shared/regions/renewer.ts).
   */
  snapshot: RingSnapshot;
}

/**
 * The ledger as a Region's lease renewer uses it (shared/regions/renewer.ts): the rate ledger, and the adoption of a
 * Region's share of the budgets and the item's view for a renewal. Apart from DynamoRateLedger, so that the vend
 * function (which never adopts a share) does not carry it.
 */
export class RegionalRateLedger extends DynamoRateLedger {
  /** The plan a permit of the set is decided on now: its learned classes' rings as its (cached) view says. */
  async planOf(limits: RateLimitSettings, setId: string): Promise<LimitPlan> {
    return (await this.core.planOf(limits, setId)).plan;
  }

  /**
   * Adopts a Region's share of the budgets of one ledger key (issue 27): ONE conditional write of the item, like
   * a grant's (so it waits for no lock and a grant decided on the share before it fails its condition and is
   * decided again: once this resolves, no grant beyond the new share can still be written). Idempotent: the same
   * share again writes nothing, and a re-send after a lost answer is told by its write id like every write. The
   * rule (region-share.ts, adoptionOf) is applied to the item as the write finds it: `replace` (the default) is
   * refused (`stale`) when the item holds a newer share (a later version, or without versions a later fence: a
   * delayed renewer); `cap` lowers the held share to at most `share.limits` and stamps it with `share.version`
   * (issue 33: a renewal's step before its lease write). Grants made under a larger share stay counted: a lower
   * share holds new grants until they leave the span.
   */
  async adoptShare(
    tokenId: string,
    limits: RateLimitSettings,
    setId: string | undefined,
    share: RegionShare,
    options: { mode?: AdoptionMode } = {},
  ): Promise<AdoptShareResult> {
    checkTokenId(tokenId);
    const { plan } = await this.core.planOf(limits, setId);
    const wanted = checkShare(share, plan);
    const mode = options.mode ?? 'replace';
    const { adoption, snapshot } = await this.core.items.apply(tokenId, plan, (state, g, now) => {
      const { change, outcome } = adoptShare(state, { plan, wanted, mode }, { g, now });
      return { change, result: outcome };
    });
    const result: AdoptShareResult = { ...adoption, snapshot };
    this.core.telemetry.info('rate ledger: region share', {
      tokenId,
      mode,
      outcome: result.outcome,
      fenceAt: result.share.fenceAt,
      limits: result.share.limits,
      ...(result.share.version === undefined ? {} : { version: result.share.version }),
    });
    return result;
  }

  /**
   * The snapshot and the Region share the item holds now, from one fresh read (a read, no write): what a lease
   * renewer needs to plan a renewal (shared/regions/renewer.ts): the share it enforces, so a lower one is adopted
   * before the lease item says so.
   */
  async regionView(
    tokenId: string,
    limits: RateLimitSettings,
    setId?: string,
  ): Promise<{ snapshot: RingSnapshot; share?: RegionShare; asked: number }> {
    checkTokenId(tokenId);
    const { plan } = await this.core.planOf(limits, setId);
    const { state, g } = await this.core.readAt(tokenId, plan);
    return {
      snapshot: ringSnapshotOf(state, plan, g),
      ...(state.share ? { share: state.share } : {}),
      asked: state.asked ?? 0,
    };
  }
}
