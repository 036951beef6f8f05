import type { LedgerState } from '../ledger-state.js';
import { randomChars } from '../receipts.js';

/**
 * Write ids (`w`, a string set): every write adds its own, so that after a lost answer (the SDK re-sends a write
 * that was applied, and the copy fails its condition) the ledger can tell its own applied write from someone
 * else's by reading the item. A full write replaces the set with its own id; head additions add theirs, and a
 * head addition is conditional on its id not being there yet. Head additions happen only within one slot of
 * the shortest window (a second at 60 s), so the set holds the writes of about a second, at most
 * WRITE_IDS_LIMIT: in a busier second, the next write is a full write, which resets the set. No write goes
 * without an id.
 */

/**
 * Write ids of earlier generations carried by a full write (`wp`, newest first): a full write replaces `w` with its
 * own id, so without them a write applied just before another process's full write could no longer be told
 * after a lost answer, and its grant would be decided again (counted twice). A write's id survives until this
 * many later writes have been carried past it: far longer than the SDK's retries of it take (a few hundred
 * milliseconds), at the vendor's 50 a minute. Every set carries them (`wp` in item format 1, which releases from
 * before reservations ignore; inside `rb` in format 2).
 */
export const CARRIED_WRITE_IDS = 12;
/** Write ids an item's set holds at most: past it, the next write is a full write, which resets the set (see above). */
export const WRITE_IDS_LIMIT = 12;
/** Characters of a write id: 30 random bits (unique enough among the dozen writes of a second). */
export const WRITE_ID_LENGTH = 5;
const WRITE_ID = /^[A-Za-z0-9_-]{5}$/;

/** A candidate write id: 30 random bits. */
export const randomWriteId = (): string => randomChars(WRITE_ID_LENGTH);
/**
 * A write id that is none of `present` (the ids of the item the write is planned on, `w` and `wp`): an id already
 * there would make a write that failed its condition read the item, find "its" id and take itself for applied (a
 * grant answered and never counted, issue 34). Same width as before, so release N-1 reads it.
 */
export function newWriteId(present: (id: string) => boolean, draw: () => string = randomWriteId): string {
  for (;;) {
    const id = draw();
    if (!present(id)) return id;
  }
}

export const isWriteId = (id: string): boolean => WRITE_ID.test(id);

/** Whether the item (`state`) holds this write id: in its set `w`, or carried by a full write (`wp`). */
export const wroteWithId = (
  state: Pick<LedgerState, 'writeIds' | 'carriedWriteIds'>,
  writeId: string,
): boolean => state.writeIds.has(writeId) || state.carriedWriteIds.includes(writeId);
