import { BrokerError } from '../errors.js';
import { LedgerClockSkewError } from '../ledger/errors.js';
import { type LedgerClock, MAX_LEDGER_CLOCK_SKEW_MS } from '../ledger/ledger-clock.js';
import type { LimitPlan } from '../ledger/limit-plan.js';
import { CLOCK_BOUND_MS } from './lease.js';

/**
 * The time a lease renewer decides with (issue 33): renewal times, `leaseUntil`, the fence, the other Region's
 * claims, its demand. It is its ledger's time, DynamoDB's clock as this process corrects to it (ledger-clock.ts,
 * the same reference and the same correction as the ledger of the same DynamoDB client), never the process's raw
 * clock: the fence it adopts is enforced on ledger time, and the other Region reads the record on its own ledger
 * time. A renewer on a container clock 90 s ahead judged the other Region's lease lapsed and took its share: 57
 * grants in a 60 s window (test/regions-cases.test.ts).
 *
 * The lease rules allow two Regions' clocks CLOCK_BOUND_MS apart. Each Region's renewer is held to a quarter of it
 * (RENEWER_CLOCK_SHARE: its time within 250 ms of its Region's DynamoDB clock), so two renewers are at most half
 * the bound apart beyond their Regions' DynamoDB clocks, and the other half covers those clocks' own difference (the
 * Time Sync Service keeps them far closer) and the vend processes' ledger times (within a tenth of the margin's
 * slack of DynamoDB's once corrected: 100 ms by default) that enforce the fence and stamp the snapshot's slots.
 * Where it cannot be that sure, the renewer renews nothing and adopts nothing (RenewerClockRefusedError): its
 * ledger fences itself at the fence it holds, which is the safe way round.
 */
export const RENEWER_CLOCK_SHARE = 0.25;
/** The most a renewer's time may be off its Region's DynamoDB clock (RENEWER_CLOCK_SHARE of CLOCK_BOUND_MS). */
export const RENEWER_CLOCK_TOLERANCE_MS = RENEWER_CLOCK_SHARE * CLOCK_BOUND_MS;

/**
 * Why a renewer refuses to renew (the metric's Reason): `unmeasured`, no DynamoDB answer yet; `uncertain`, DynamoDB's
 * clock not yet known to within the renewer's share of the bound (a cold start's first answers: it probes on,
 * renewer.ts); `skew`, the process's clock further from DynamoDB's than the ledger accepts (10 minutes).
 */
export type RenewalRefusal = 'unmeasured' | 'uncertain' | 'skew';

export class RenewerClockRefusedError extends BrokerError {
  readonly code = 'RENEWER_CLOCK_REFUSED';
  readonly reason: RenewalRefusal;
  /** DynamoDB's clock minus the process's, as far as known (ms). */
  readonly offsetMs: number | undefined;

  constructor(reason: RenewalRefusal, message: string, offsetMs: number | undefined) {
    super(message);
    this.reason = reason;
    this.offsetMs = offsetMs;
  }
}

export interface RenewerTime {
  /** Ledger time now for a renewal under these plans; throws RenewerClockRefusedError where it must not decide. */
  now(plans: readonly LimitPlan[]): number;
}

/**
 * The renewer's ledger time, or why it must not decide (nothing thrown: the simulation asks at every poll): its
 * ledger's own rule (LedgerClock.check: measured, within the skew the ledger accepts, a correction known to within
 * a tenth of the margin's slack) and, whether corrected or not, DynamoDB's clock known to within the renewer's
 * share of the bound.
 */
export function renewerCheck(
  ledgerClock: Pick<LedgerClock, 'check'>,
  plans: readonly LimitPlan[],
  clockBoundMs = CLOCK_BOUND_MS,
): { at: number } | { refusal: RenewalRefusal; offsetMs: number | undefined; uncertaintyMs?: number } {
  const check = ledgerClock.check(plans);
  if (!check.ok) {
    const refusal = check.refused ? 'skew' : check.offsetMs === undefined ? 'unmeasured' : 'uncertain';
    return { refusal, offsetMs: check.offsetMs };
  }
  if (check.uncertaintyMs > RENEWER_CLOCK_SHARE * clockBoundMs)
    return { refusal: 'uncertain', offsetMs: check.correction, uncertaintyMs: check.uncertaintyMs };
  return { at: check.at };
}

/** The renewer's ledger time from the ledger clock of its DynamoDB client (renewer-setup.ts builds it). */
export function renewerTime(
  ledgerClock: Pick<LedgerClock, 'check'>,
  clockBoundMs = CLOCK_BOUND_MS,
): RenewerTime {
  return {
    now(plans) {
      const check = renewerCheck(ledgerClock, plans, clockBoundMs);
      if ('at' in check) return check.at;
      const { refusal, offsetMs, uncertaintyMs } = check;
      const off = offsetMs === undefined ? '' : `, ${Math.round(offsetMs / 100) / 10} s off DynamoDB's`;
      const message = {
        unmeasured: "this process has not yet compared its clock with DynamoDB's",
        uncertain: `DynamoDB's clock not yet known closely enough${
          uncertaintyMs === undefined ? '' : ` (to within ${Math.round(uncertaintyMs)} ms)`
        }${off}`,
        skew: `this process's clock is too far from DynamoDB's (at most ${MAX_LEDGER_CLOCK_SKEW_MS / 1000} s accepted)${off}`,
      }[refusal];
      throw new RenewerClockRefusedError(refusal, `lease renewal refused: ${message}`, offsetMs);
    },
  };
}

/** A refusal for what the renewer's ledger refused on its own clock (the same reference): else undefined. */
export function refusalOf(error: unknown): RenewerClockRefusedError | undefined {
  if (error instanceof RenewerClockRefusedError) return error;
  if (!(error instanceof LedgerClockSkewError)) return undefined;
  const reason: RenewalRefusal = error.refused
    ? 'skew'
    : error.offsetMs === undefined
      ? 'unmeasured'
      : 'uncertain';
  return new RenewerClockRefusedError(reason, `lease renewal refused: ${error.message}`, error.offsetMs);
}
