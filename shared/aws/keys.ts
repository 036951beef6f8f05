import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { PARTITION_KEY } from './tables.js';

/**
 * Every partition key the broker reads or writes, built here and nowhere else (envoyproxy/ratelimit's `cache_key`):
 * each kind of item has a prefix of its own, so that kinds sharing a table never meet, and IAM grants a function
 * only the kinds it needs by their prefix (`dynamodb:LeadingKeys`, infra/broker-stack.ts and
 * infra/constructs/lease-renewer.ts). A prefix is part of what release N-1 reads: never change one.
 *
 * | prefix     | item                                                              | table                        |
 * | ---------- | ----------------------------------------------------------------- | ---------------------------- |
 * | `token#`   | a ledger item (shared/ledger/item/ledger-item.ts), one per ledger key | ledger                       |
 * | `report#`  | a report-limit counter or re-login claim (shared/vend/report-limits.ts) | ledger                 |
 * | `learned#` | a set's learned class limits (shared/ledger/learned-store.ts)     | ledger; MRSC in two Regions  |
 * | `set#`     | a credential set's tokens (shared/tokens/dynamo-token-item.ts)    | tokens; MRSC in two Regions  |
 * | `lease#`   | a ledger key's lease item (shared/regions/lease-store.ts)         | MRSC (two Regions only)      |
 */
export enum KEY_PREFIX {
  token = 'token#',
  report = 'report#',
  learned = 'learned#',
  set = 'set#',
  lease = 'lease#',
}

/** A key as the DynamoDB client takes it: the one partition key attribute (shared/aws/tables.ts). */
export type ItemKey = Record<string, AttributeValue>;

const keyOf = (pk: string): ItemKey => ({ [PARTITION_KEY]: { S: pk } });

/** The ledger item of a ledger key: a token id, or `set-<id>` for a user's budget (shared/vend/ledger-key.ts). */
export const tokenKey = (ledgerKey: string): ItemKey => keyOf(`${KEY_PREFIX.token}${ledgerKey}`);

/** A set's learned class limits. */
export const learnedKey = (setId: string): ItemKey => keyOf(`${KEY_PREFIX.learned}${setId}`);

/** A set's token item: its current and previous tokens, the refresh lease, the failure state. */
export const setKey = (credentialSetId: string): ItemKey => keyOf(`${KEY_PREFIX.set}${credentialSetId}`);

/** The lease item of one ledger key (`quotaKey`), leased under the set `setId` (shared/regions/renewer.ts). */
export const leaseKey = (setId: string, quotaKey: string): ItemKey =>
  keyOf(`${KEY_PREFIX.lease}${setId}#${quotaKey}`);

/**
 * A report-limit counter of one window (`window`: its number since the epoch): the caller's (`callerTag`, a hash of
 * its principal) or, without one, the whole set's. `kind`: the report kind's short name.
 */
export const reportCountKey = (kind: string, setId: string, window: number, callerTag?: string): ItemKey =>
  keyOf(
    `${KEY_PREFIX.report}${kind}#${setId}#${callerTag === undefined ? 'set' : `caller#${callerTag}`}#${window}`,
  );

/** A set's claim of its one rejection-driven re-login per interval. */
export const reloginKey = (setId: string): ItemKey => keyOf(`${KEY_PREFIX.report}relogin#${setId}`);
