import type { RateLimitSettings } from '../../shared/config/credential-sets.js';
import {
  type AcquireOutcome,
  acquire,
  emptyState,
  type LedgerState,
  remainingAt,
  stateAt,
} from '../../shared/ledger/ledger-state.js';
import { planFor } from '../../shared/ledger/limit-plan.js';
import { returnPermits as giveBack } from '../../shared/ledger/operations/give-back.js';
import { callerTag, newReceiptId } from '../../shared/ledger/receipts.js';
import { applyVendorFeedback, type VendorFeedback } from '../../shared/ledger/vendor-feedback.js';

/** The pure core of the ledger driven the way the adapter drives it: move the state to g, then act on it. */
export class LedgerCore {
  state: LedgerState = emptyState();
  constructor(readonly limits: RateLimitSettings) {}
  get plan() {
    return planFor(this.limits);
  }
  #at(g: number): number {
    const time = Math.max(g, this.state.time);
    this.state = stateAt(this.state, time, this.plan.marginMs);
    return time;
  }
  acquire(g: number, k: number, cls?: string, consumer?: string): AcquireOutcome {
    const time = this.#at(g);
    return acquire(this.state, this.plan, time, k, cls, consumer);
  }
  /** Asks without keeping a grant (the state is restored). */
  probe(g: number, k: number, cls?: string): AcquireOutcome {
    const saved = this.state;
    const copy = stateAt(saved, Math.max(g, saved.time), this.plan.marginMs);
    const outcome = acquire(copy, this.plan, Math.max(g, saved.time), k, cls);
    this.state = saved;
    return outcome;
  }
  /** Gives back k of a grant of k at grantedAt (its receipt verified): whether any permit came back. */
  giveBack(g: number, k: number, grantedAt: number, cls?: string): boolean {
    this.#at(g);
    const claims = { key: 'token', cls, count: k, grantedAt, caller: '', id: newReceiptId(g + 10_000) };
    const outcome = giveBack(this.state, this.plan, claims, k);
    return typeof outcome === 'object' && outcome.returned > 0;
  }
  /** A vendor report from `caller` (one unnamed caller by default). */
  feedback(g: number, report: VendorFeedback, caller?: string): boolean {
    const time = this.#at(g);
    const reporter = caller === undefined ? undefined : callerTag(caller);
    return applyVendorFeedback(this.state, this.plan, time, time, report, reporter);
  }
  remaining(g: number, cls?: string) {
    return remainingAt(
      stateAt(this.state, Math.max(g, this.state.time), this.plan.marginMs),
      this.plan,
      g,
      cls,
    );
  }
}
