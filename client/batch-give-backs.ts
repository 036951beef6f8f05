import type { Clock } from '../shared/clock.js';
import type { Telemetry } from '../shared/telemetry.js';
import type { BrokerApi } from './broker-api.js';
import type { PermitSettlement } from './permit-handle.js';
import type { Batch, PermitPool } from './permit-pool.js';

/**
 * Unused permits back to the ledger, a batch (one grant) at a time. The ledger honours a receipt once, whatever
 * its count, and keeps only a few spent receipts per caller: so a batch goes back in ONE give-back, with the
 * permits still in hand and those its holders gave back (PermitHandle), once the batch has left the pool and
 * every permit handed out of it is settled (used or given back), or when its validity ends (a permit held that
 * long was sent or lapsed), whichever is first; on close at once. A permit given back while its batch is still
 * in the pool goes to the next caller of this client instead: it was never sent.
 */
export class BatchGiveBacks {
  readonly #options: { api: BrokerApi; clock: Clock; telemetry: Telemetry; closing: AbortSignal };
  readonly #givingBack = new Set<Promise<void>>();
  /** Batches out of the pool whose give-back waits for permits still held. */
  readonly #held = new Map<Batch, PermitPool>();

  constructor(options: { api: BrokerApi; clock: Clock; telemetry: Telemetry; closing: AbortSignal }) {
    this.#options = options;
  }

  /** A holder settled a permit of `batch` (PermitHandle); true when a given-back one counts back. */
  settle(pool: PermitPool, batch: Batch, how: PermitSettlement): boolean {
    if (batch.spent || this.#options.closing.aborted) return false;
    batch.out--;
    if (how === 'givenBack' && !pool.putBack(batch, this.#options.clock.now())) batch.returned++;
    this.finish(pool, [batch]);
    return how === 'givenBack';
  }

  /**
   * Batches out of the pool (lapsed, used up, drained, or settled by a holder): each goes back in one give-back
   * once no permit of it is held, else when its validity ends (a permit held that long was sent or lapsed), or
   * on close. A batch still in the pool is left there.
   */
  finish(pool: PermitPool, batches: readonly Batch[]): void {
    const { clock } = this.#options;
    for (const batch of batches) {
      if (batch.spent || pool.batches.includes(batch)) continue;
      if (batch.out <= 0 || this.#options.closing.aborted) {
        this.#giveBack(pool, batch);
        continue;
      }
      // Nothing to give back (yet), or the wait is armed already.
      if (batch.left + batch.returned === 0 || batch.ending) continue;
      const ending = new AbortController();
      batch.ending = ending;
      this.#held.set(batch, pool);
      clock.sleep(Math.max(0, batch.endsAt - clock.now()), ending.signal).then(
        () => this.#giveBack(pool, batch),
        () => undefined,
      );
    }
  }

  /** Presents the batch's receipt once, with what is left in hand and what its holders gave back. */
  #giveBack(pool: PermitPool, batch: Batch): void {
    if (batch.spent) return;
    batch.spent = true;
    batch.ending?.abort();
    this.#held.delete(batch);
    const count = batch.left + batch.returned;
    batch.left = 0;
    batch.returned = 0;
    if (count > 0) {
      const done: Promise<void> = this.#options.api
        .returnPermits(pool.setId, { tokenId: pool.tokenId, count, receipt: batch.receipt })
        .then(
          (returned) => {
            this.#options.telemetry.debug('permits given back', {
              credentialSet: pool.setId,
              tokenId: pool.tokenId,
              count,
              returned,
            });
          },
          (error: unknown) => {
            // Not given back: they age out of the ledger with their window. Never a reason to fail a caller.
            this.#options.telemetry.warn('permits could not be given back', {
              credentialSet: pool.setId,
              tokenId: pool.tokenId,
              count,
              errorCode: (error as { code?: unknown })?.code ?? 'UNKNOWN',
            });
          },
        )
        .finally(() => this.#givingBack.delete(done));
      this.#givingBack.add(done);
    }
  }

  /** The client closes (after the pools were drained): what was gathered goes back now, and is waited for. */
  async close(): Promise<void> {
    for (const [batch, pool] of this.#held) this.#giveBack(pool, batch);
    while (this.#givingBack.size > 0) await Promise.allSettled([...this.#givingBack]);
  }
}
