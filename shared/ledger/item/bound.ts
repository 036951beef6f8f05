/**
 * The item's size bound and format choice, for the configuration path (limit-plan.ts compile refuses settings whose
 * item cannot fit: synth, check-config, start, and the client's and CLI's configuration checks). The folder's
 * second public face beside index.ts (.dependency-cruiser.cjs, rule ledger-item-closed): pure, no I/O, so what
 * checks a configuration does not bundle the write loop and the DynamoDB client.
 */
export { chooseItemFormat } from './item-size.js';
