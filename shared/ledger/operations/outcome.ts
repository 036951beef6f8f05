import type { ReceiptProblem } from '../errors.js';
import type { Change } from '../item/index.js';
import type { Adoption } from '../region-share.js';
import type { RingSnapshot } from '../ring-snapshot.js';
import type { GiveBackResult, PermitDecision } from '../types.js';

/**
 * What an operation (operations/*.ts) decided, one union for all of them (issue 34: it replaces the STALE_VIEW
 * symbol, the 'SPENT' string and the errors returned as values). The write loop writes what the operation changed;
 * the ledger (dynamo-ledger.ts) turns the outcome into its answer.
 */
export type Outcome =
  /** A grant, or a denial, decided on the item. */
  | { kind: 'decided'; decision: PermitDecision }
  /**
   * The item's grants were decided on a newer learned view than the one this acquire holds: read the view again
   * and decide on it (nothing was written).
   */
  | { kind: 'stale-view' }
  /** A give-back the item took (or could not record: `result.notRecorded`, no failure). */
  | { kind: 'given-back'; result: GiveBackResult }
  /** A receipt the item cannot honour: nothing was changed. */
  | { kind: 'receipt-refused'; problem: ReceiptProblem; message: string }
  /** A vendor report: whether it tightened the item (a cooldown, a cap, a learned ring's seed). */
  | { kind: 'reported'; tightened: boolean }
  /** A share adoption, and the item's rings at it. */
  | { kind: 'share'; adoption: Adoption; snapshot: RingSnapshot };

/** What an operation did to the state it was handed and what it decided. */
export interface Applied<O extends Outcome = Outcome> {
  change: Change;
  outcome: O;
}

/** Ledger time g of the attempt, and the process's reading of it (`now`, before g was raised to the item's time). */
export interface At {
  g: number;
  now: number;
}
