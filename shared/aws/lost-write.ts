import { ConditionalCheckFailedException, ReplicatedWriteConflictException } from '@aws-sdk/client-dynamodb';

/**
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
