/** A regional ledger counts its denied asks in the item at most this often per key and process. */
export const ASKED_WRITE_MS = 1000;

/** Denied asks of one key not yet counted in the item, and when this process last counted them. */
export interface PendingAsks {
  count: number;
  writtenAt: number;
}

export const NO_PENDING_ASKS: PendingAsks = { count: 0, writtenAt: Number.NEGATIVE_INFINITY };

/**
 * Denied-ask count: a regional ledger's denied asks go to the item (`dq`, an ADD outside the write loop: it
 * commutes with every write) for its lease renewer's demand, at most one write a second per key and process,
 * carrying what was denied since. `count`: the asks denied now; `write`: what to add to the item now, if anything.
 */
export function countDenied(
  pending: PendingAsks,
  count: number,
  now: number,
): { pending: PendingAsks; write: number | undefined } {
  const total = pending.count + count;
  if (now - pending.writtenAt < ASKED_WRITE_MS)
    return { pending: { count: total, writtenAt: pending.writtenAt }, write: undefined };
  return { pending: { count: 0, writtenAt: now }, write: total };
}
