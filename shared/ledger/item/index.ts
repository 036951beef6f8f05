export { ATTR, ITEM_ATTRIBUTES } from './attributes.js';
export { headAdditions } from './fast-grant.js';
export {
  ITEM_BYTES_BUDGET,
  packedItemBound,
  RESERVED_ITEM_BYTES_BUDGET,
  textItemBound,
} from './item-size.js';
export { ledgerKey } from './ledger-item.js';
export type { Snapshot } from './ledger-table.js';
export { LedgerTable } from './ledger-table.js';
export { decodeState, encodeState, PURGE_SLACK_SECONDS } from './state-codec.js';
export { CARRIED_WRITE_IDS, randomWriteId, WRITE_IDS_LIMIT } from './write-ids.js';
export { type Change, type ItemOperation, ItemWriter, type ItemWriterOptions } from './write-loop.js';
