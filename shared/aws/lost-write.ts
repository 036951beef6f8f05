import { ConditionalCheckFailedException, ReplicatedWriteConflictException } from '@aws-sdk/client-dynamodb';

/**
 * Lost answers. When an applied write's answer is lost, the SDK re-sends it and the copy fails its condition; when
 * a write fails for good, nobody knows whether it applied. Every store here writes conditionally and, after such a
 * failure, lets the item, read afresh, say whether its write is in it. What names "its write" in the item differs
 * by store, each for a reason (docs/ledger.md has the same list):
 *
 * - The ledger (shared/ledger): a write id per write, kept for a while in the item (`w`, `wp`). Many processes
 *   write one item at once, and their head additions commute (ADD, not conditional on the version), so neither the
 *   version nor the content can say whose write landed: only an id the write itself carries can.
 * - The token store (shared/tokens/dynamo-token-store.ts): the refresh lease's id. One writer at a time by
 *   construction (the lease), and the lease id is in the item already for the protocol (only its holder may
 *   promote or record a failure): the take is applied if the lease holds its id, a release if `releasedLeaseId` is
 *   its id. An id of its own per write would say nothing more.
 * - The lease store (shared/regions/lease-store.ts): the record itself. Each Region's record has one writer (its
 *   renewer), and every write replaces it whole with a new renewal time, so the record as written, under a newer
 *   version, is the write. The MRSC item has no TTL and no room to grow: nothing is added for it.
 * - The learned store (shared/ledger/learned-store.ts): the change, decided again on the fresh read, is no change
 *   when its earlier copy applied.
 *
 * Another writer got there first: the condition failed, or (MRSC) the other Region's write to the item was in
 * flight and this one was refused unapplied. Either way the item, read afresh, decides. By class and by name (an
 * error from another copy of the SDK is not an instance of this one's classes).
 */
export function lostToAnotherWriter(error: unknown): boolean {
  const name = (error as Error | undefined)?.name;
  return (
    error instanceof ConditionalCheckFailedException ||
    error instanceof ReplicatedWriteConflictException ||
    name === 'ConditionalCheckFailedException' ||
    name === 'ReplicatedWriteConflictException'
  );
}
