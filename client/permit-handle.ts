import type { Permit } from './types.js';

/** How the holder settled a permit: sent (used) or not (given back). */
export type PermitSettlement = 'used' | 'givenBack';

/**
 * One permit as `acquirePermit` hands it out: the permit's fields, and what its holder does with it. A permit
 * not sent is given back (`giveBack()`); one sent may be marked (`markUsed()`), which lets the client give
 * back the other unused permits of its batch sooner. A permit left alone counts as used once its validity ends.
 * Settling twice does nothing: the first word counts.
 */
export class PermitHandle implements Permit {
  readonly credentialSet: string;
  readonly tokenId: string;
  // Declared, not defined: absent (not undefined) for a permit of no class, as Permit has it.
  declare readonly class?: string;
  readonly grantedAt: number;
  readonly validUntil: number;
  readonly #settle: (how: PermitSettlement) => boolean;
  #settled = false;

  constructor(permit: Permit, settle: (how: PermitSettlement) => boolean) {
    this.credentialSet = permit.credentialSet;
    this.tokenId = permit.tokenId;
    if (permit.class !== undefined)
      Object.defineProperty(this, 'class', { value: permit.class, enumerable: true });
    this.grantedAt = permit.grantedAt;
    this.validUntil = permit.validUntil;
    this.#settle = settle;
  }

  /**
   * The permit was not sent: it counts back. True when it does: to this client's next caller while its batch
   * is still in hand and usable, else to the ledger with the one give-back of its batch (when the batch's last
   * permit is settled or its validity ends, whichever is first; `close()` sends what is gathered at once).
   * False when it is too late (its batch was given back, or the client closed) or it was settled already.
   */
  giveBack(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    return this.#settle('givenBack');
  }

  /** The permit was sent. Optional: it only lets the batch's unused permits go back sooner. */
  markUsed(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#settle('used');
  }
}
