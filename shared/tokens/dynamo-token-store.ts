import {
  type AttributeValue,
  type ConditionalCheckFailedException,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { setKey } from '../aws/keys.js';
import { lostToAnotherWriter } from '../aws/lost-write.js';
import { leaseIdsOf, purgeAtFor } from './dynamo-token-item.js';
import { DynamoTokenReader } from './dynamo-token-reader.js';
import { TokenStoreUnavailableError } from './errors.js';
import type {
  PromoteRequest,
  RecordFailureRequest,
  TakeLeaseRequest,
  TakeLeaseResult,
  TokenStore,
} from './token-store.js';

// dynalite (like DynamoDB) rejects reserved words such as `current`: every name goes through a placeholder.
const NAMES = {
  '#setId': 'credentialSetId',
  '#current': 'current',
  '#previous': 'previous',
  '#lease': 'lease',
  '#leaseId': 'leaseId',
  '#expiresAt': 'expiresAt',
  '#lastAttemptAt': 'lastAttemptAt',
  '#failure': 'failure',
  '#kind': 'kind',
  '#cooldownUntil': 'cooldownUntil',
  '#secretVersion': 'secretVersion',
  '#tokenId': 'tokenId',
  '#exp': 'exp',
  '#version': 'version',
  '#purgeAt': 'purgeAt',
  '#releasedLeaseId': 'releasedLeaseId',
} as const;
type Name = keyof typeof NAMES;

const used = (placeholder: string, text: string): boolean =>
  // `#lease` must not match inside `#leaseId`, nor `#exp` inside `#expiresAt`.
  new RegExp(`${placeholder}(?![\\w])`).test(text);

/** Names and values for the placeholders the expressions use, and only those: DynamoDB refuses unused ones. */
function placeholders(expressions: string[], input: Record<string, unknown>) {
  const text = expressions.join(' ');
  const names = Object.fromEntries(Object.entries(NAMES).filter(([placeholder]) => used(placeholder, text)));
  const values = Object.fromEntries(Object.entries(input).filter(([placeholder]) => used(placeholder, text)));
  return {
    ExpressionAttributeNames: names as Record<Name, string>,
    ExpressionAttributeValues: marshall(values, { removeUndefinedValues: true }) as Record<
      string,
      AttributeValue
    >,
  };
}

/**
 * The tokens table on DynamoDB. Conditional writes only; a lost condition is an answer, not an error.
 *
 * Exactly once, as the rate ledger does it (dynamo-ledger.ts): every write carries the lease id of its attempt
 * into the item, the take in the lease, the promote and the failure in `releasedLeaseId`, and no copy of a
 * write can apply twice (the take needs a free lease, the others the lease they free). When the SDK re-sends a
 * write whose answer was lost, the copy fails its condition; when a write fails (its condition, or for good
 * after the SDK's retries), the item decides: the one DynamoDB returns with the failed condition (ALL_OLD), or
 * else a consistent read. If it carries this attempt's lease id, the write applied and is answered as such;
 * if not, someone else won the race (a failed condition) or the table failed (anything else). The lease id, not a
 * write id of its own as the ledger has: one writer at a time by construction, and the id is in the item already
 * (shared/aws/lost-write.ts compares the stores' ways).
 *
 * On an MRSC table (a two-Region stage, docs/multi-region.md) both Regions' refreshers write here, and a write
 * that meets the other Region's write in flight is refused unapplied with ReplicatedWriteConflictException: the
 * other Region wrote first, which is what a failed condition says too, so it is answered as one (a fresh read
 * decides), never as an outage.
 */
export class DynamoTokenStore extends DynamoTokenReader implements TokenStore {
  async takeLease(request: TakeLeaseRequest): Promise<TakeLeaseResult> {
    const conditions = [
      '(attribute_not_exists(#lease) OR #lease.#expiresAt <= :now)',
      '(attribute_not_exists(#lastAttemptAt) OR #lastAttemptAt <= :attemptCutoff)',
      request.secretVersion === undefined
        ? '(attribute_not_exists(#failure) OR #failure.#cooldownUntil <= :now)'
        : '(attribute_not_exists(#failure) OR #failure.#cooldownUntil <= :now OR (#failure.#kind = :rejected AND #failure.#secretVersion <> :secretVersion))',
      request.expectedTokenId !== null
        ? '#current.#tokenId = :expectedTokenId'
        : request.expiredTokenId === undefined
          ? '(attribute_not_exists(#current) OR #current.#exp <= :nowSeconds)'
          : // Expired on the vendor's clock (ahead of ours), not yet on ours: the reader names it.
            '(attribute_not_exists(#current) OR #current.#exp <= :nowSeconds OR #current.#tokenId = :expiredTokenId)',
    ];
    const update =
      'SET #setId = :setId, #lease = :lease, #lastAttemptAt = :now, #purgeAt = :purgeAt ADD #version :one';
    const condition = conditions.join(' AND ');
    const output = await this.#conditionalUpdate(request.credentialSetId, 'takeLease', {
      UpdateExpression: update,
      ConditionExpression: condition,
      ...placeholders([update, condition], {
        ':setId': request.credentialSetId,
        ':lease': { holder: request.holder, leaseId: request.leaseId, expiresAt: request.leaseExpiresAt },
        ':now': request.now,
        ':nowSeconds': Math.floor(request.now / 1000),
        ':attemptCutoff': request.lastAttemptNoLaterThan,
        ':purgeAt': purgeAtFor(request.now),
        ':one': 1,
        ':rejected': request.secretVersion === undefined ? undefined : 'REJECTED',
        ':secretVersion': request.secretVersion,
        ':expectedTokenId': request.expectedTokenId ?? undefined,
        ':expiredTokenId': request.expectedTokenId === null ? request.expiredTokenId : undefined,
      }),
      ReturnValues: 'ALL_NEW',
      appliedIn: (item) => leaseIdsOf(item).held === request.leaseId,
    });
    if (!output) return { taken: false };
    const state = this.state(output, request.now, request.credentialSetId);
    if (!state)
      throw new TokenStoreUnavailableError(`set ${request.credentialSetId}: lease taken on a purged item`);
    return { taken: true, state };
  }

  async promote(request: PromoteRequest): Promise<boolean> {
    const update = request.previous
      ? 'SET #current = :token, #previous = :previous, #releasedLeaseId = :leaseId, #purgeAt = :purgeAt REMOVE #lease, #failure ADD #version :one'
      : 'SET #current = :token, #releasedLeaseId = :leaseId, #purgeAt = :purgeAt REMOVE #lease, #failure, #previous ADD #version :one';
    return this.#holderWrite(request.credentialSetId, 'promote', request.leaseId, update, {
      ':token': request.token,
      ':previous': request.previous,
      ':purgeAt': purgeAtFor(request.now),
      ':one': 1,
    });
  }

  async recordFailure(request: RecordFailureRequest): Promise<boolean> {
    return this.#holderWrite(
      request.credentialSetId,
      'recordFailure',
      request.leaseId,
      'SET #failure = :failure, #releasedLeaseId = :leaseId, #purgeAt = :purgeAt REMOVE #lease ADD #version :one',
      { ':failure': request.failure, ':purgeAt': purgeAtFor(request.now), ':one': 1 },
    );
  }

  /**
   * A write only the lease holder may make, freeing the lease: conditional on the lease id of its take, which
   * it leaves in `releasedLeaseId` (`update` sets it from `:leaseId`).
   */
  async #holderWrite(
    credentialSetId: string,
    operation: string,
    leaseId: string,
    update: string,
    values: Record<string, unknown>,
  ): Promise<boolean> {
    const condition = '#lease.#leaseId = :leaseId';
    const output = await this.#conditionalUpdate(credentialSetId, operation, {
      UpdateExpression: update,
      ConditionExpression: condition,
      ...placeholders([update, condition], { ...values, ':leaseId': leaseId }),
      ReturnValues: 'NONE',
      appliedIn: (item) => leaseIdsOf(item).released === leaseId,
    });
    return output !== undefined;
  }

  /**
   * The item after the write ({} when not asked for), or undefined when the condition failed for another
   * writer. A failure is first checked against the item with `appliedIn` (this attempt's lease id in it): an
   * earlier attempt of the same write, re-sent by the SDK after a lost answer, may have applied it; the item
   * then stands for the answer.
   */
  async #conditionalUpdate(
    credentialSetId: string,
    operation: string,
    input: Omit<UpdateItemCommandInput, 'TableName' | 'Key' | 'ReturnValuesOnConditionCheckFailure'> & {
      appliedIn: (item: Record<string, AttributeValue>) => boolean;
    },
  ): Promise<Record<string, AttributeValue> | undefined> {
    const { appliedIn, ...update } = input;
    try {
      const output = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: setKey(credentialSetId),
          ...update,
          // DynamoDB (and DynamoDB Local) return the item with a failed condition, which saves the read below.
          // It holds tokens: that exception is never kept as a cause, nor logged.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return output.Attributes ?? {};
    } catch (error) {
      const conditionFailed = lostToAnotherWriter(error);
      let item: Record<string, AttributeValue> | undefined;
      try {
        item =
          // A conflict carries no item (it was refused before any condition was evaluated): read it.
          (conditionFailed && (error as ConditionalCheckFailedException).Item) ||
          (await this.get(operation, credentialSetId));
      } catch (readError) {
        // Neither the write nor the read answered: whether it applied is unknown, and the store is failing.
        throw conditionFailed ? readError : this.unavailable(operation, credentialSetId, error);
      }
      if (item && appliedIn(item)) return item;
      if (conditionFailed) return undefined;
      throw this.unavailable(operation, credentialSetId, error);
    }
  }
}
