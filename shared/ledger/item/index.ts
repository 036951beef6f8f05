/**
 * The ledger item: one DynamoDB item per ledger key (`token#<tokenId>`, ledger-item.ts), its two formats and their
 * codecs (state-codec.ts, packed-codec.ts), the bound of its size (item-size.ts), its attributes (attributes.ts),
 * and the conditional-write loop every change goes through (write-loop.ts: `ItemWriter.apply(key, plan,
 * operation)`, the operations being shared/ledger/operations/), with its batches, write ids and head additions.
 * This file is the folder's only public face (.dependency-cruiser.cjs, rule ledger-item-closed).
 *
 * Invariants. Each: the promise, the code that keeps it, the test that pins it (its name starts with the number).
 *
 * I1. The bound: in any span of a ring's window plus the margin, the grants counted never exceed the ring's limit,
 *     whatever the interleaving of processes. Kept by: every write is conditional on what it was decided on
 *     (write-loop.ts #write: a full write on the version and head-addition count it read, ledger-item.ts fullWrite;
 *     a head addition on the version and, per ring, "the head holds at most `max`", write-loop.ts grantAdditions), and a grant is
 *     decided on a state moved to its ledger time (ledger-state.ts acquire). Pinned by: test/ledger-property.test.ts
 *     "I1: never exceeds 50 in any 60 s …", test/ledger-dynamo.test.ts "I1: keeps several processes inside the limit …".
 *
 * I2. Exactly once: an operation takes effect once, whatever is re-sent. Every write carries a write id that no
 *     write id of the item it was planned on has (write-loop.ts newWriteId, drawn to avoid them), kept in the item
 *     (`w`, and `wp` carried by a full write: CARRIED_WRITE_IDS); a head addition is conditional on its id not
 *     being there yet. A write whose condition failed, or whose answer was lost, reads the item: its id there, it
 *     applied (its results stand); absent, it is decided again on the fresh state (write-loop.ts #write,
 *     wroteWithId). Pinned by: test/ledger-idempotence.test.ts "I2: …" (each write under a lost answer),
 *     test/item-write-ids.test.ts "I2: a write never takes an id already in the item it was planned on: a forced
 *     collision grants 50 in a second, not 51". Residual: an id drawn by another process between this write's
 *     read and its write is not avoided (about a dozen ids in 2^30 per write).
 *
 * I3. The item fits: settings whose worst-case item is over ITEM_BYTES_BUDGET (one write unit;
 *     RESERVED_ITEM_BYTES_BUDGET with reservations) are refused where the configuration is read (limit-plan.ts
 *     compile, on planFor: synth, check-config, start), and no item written is larger than the bound computed
 *     (item-size.ts mirrors the codecs). Pinned by: test/ledger-state.test.ts "I3: bounds the classes so that the
 *     ledger item stays within one write unit …", test/ledger-dynamo.test.ts "I3: keeps the item within its
 *     computed bound …".
 *
 * I4. Rollback safety: release N-1 (test/previous-release.json) reads every item this release writes in item
 *     format 1 and keeps the bound beside it; what it does not read is listed (attributes.ts readByPrevious).
 *     Pinned by: test/ledger-releases.test.ts "I4: keeps the bound when both releases grant, give back and report
 *     at random …", test/item-attributes.test.ts "I4: …".
 *
 * I5. Fail closed: no answer from DynamoDB (after the SDK's retries, and the item not showing the write), or
 *     more than `maxConflictRetries` conflicts in a row, is no permit: LedgerUnavailableError (write-loop.ts
 *     #runBatch, #decide). Pinned by: test/ledger-dynamo.test.ts "I5: fails closed …" (two tests).
 *
 * I6. Head additions only where they commute: a batch whose operations told the loop they only added grants
 *     (Change `grants`, the counts per ring that ledger-state.ts acquire recorded: GrantEffect; a seeded,
 *     restored or dropped ring, a cap counted down, a learned version or reservations changed are `other`), in
 *     the head slots of the item's last full write, with no vendor cap in force and room for its id in `w`
 *     (WRITE_IDS_LIMIT), is written as DynamoDB ADDs (write-loop.ts grantAdditions, ledger-item.ts headWrite);
 *     everything else is a full write. Pinned by: test/ledger-codec.test.ts "I6: …" (among them: what a grant
 *     tells is exactly what it changed, over random grants), test/ledger-dynamo.test.ts "I6: lets grants of
 *     several processes in the same slot add up …".
 *
 * I7. A receipt gives back at most what its grant gave, once, to the caller it was issued to (receipts.ts,
 *     operations/give-back.ts: signed by the item's secret `k`, its id recorded among the spent ids `g` in the same
 *     conditional write). Pinned by: test/ledger-give-back-property.test.ts "I7: never 503, never honoured twice …".
 */
export { ATTR, ITEM_ATTRIBUTES } from './attributes.js';
export {
  CARRIED_WRITE_IDS,
  WRITE_IDS_LIMIT,
} from './item-size.js';
export { ledgerKey } from './ledger-item.js';
export type { Snapshot } from './ledger-table.js';
export { LedgerTable } from './ledger-table.js';
/** Format 2's `rb` decoded: for tools that show an item (docs/ledger.md's worked examples). */
export { decodePacked } from './packed-codec.js';
export { decodeState, encodeState, PURGE_SLACK_SECONDS } from './state-codec.js';
export {
  type Change,
  grantAdditions,
  ItemWriter,
  randomWriteId,
} from './write-loop.js';
