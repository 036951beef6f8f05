import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  type GetItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { setKey } from '../aws/keys.js';
import { itemToState } from './dynamo-token-item.js';
import { TokenStoreUnavailableError } from './errors.js';
import type { CredentialSetState } from './token-state.js';
import type { TokenStore } from './token-store.js';

/**
 * The tokens table's reads (consistent GetItem): what the vend function and the lease renewer need of it. The
 * writes (the refresher's lease, promote and failure) are DynamoTokenStore's, which extends this: a function that
 * only reads does not carry them, nor the marshalling they need (the vend bundle's size, infra/tools).
 */
export class DynamoTokenReader implements Pick<TokenStore, 'read' | 'readVersion'> {
  protected readonly client: DynamoDBClient;
  protected readonly tableName: string;

  constructor(options: { client: DynamoDBClient; tableName: string }) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  async read(credentialSetId: string, now: number): Promise<CredentialSetState | undefined> {
    const item = await this.get('read', credentialSetId);
    return item ? this.state(item, now, credentialSetId) : undefined;
  }

  async readVersion(credentialSetId: string): Promise<number | undefined> {
    const item = await this.get('readVersion', credentialSetId, {
      ProjectionExpression: '#version',
      ExpressionAttributeNames: { '#version': 'version' },
    });
    if (!item) return undefined;
    const version = Number(item.version?.N ?? '0');
    return Number.isFinite(version) ? version : 0;
  }

  /** A consistent read of the set's item (all of it, or a projection); DynamoDB failing is the store's outage. */
  protected async get(
    operation: string,
    credentialSetId: string,
    projection: Pick<GetItemCommandInput, 'ProjectionExpression' | 'ExpressionAttributeNames'> = {},
  ): Promise<Record<string, AttributeValue> | undefined> {
    try {
      const output = await this.client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: setKey(credentialSetId),
          ConsistentRead: true,
          ...projection,
        }),
      );
      return output.Item;
    } catch (error) {
      throw this.unavailable(operation, credentialSetId, error);
    }
  }

  protected state(item: Record<string, AttributeValue>, now: number, credentialSetId: string) {
    const result = itemToState(item, now);
    if (!result.ok) {
      throw new TokenStoreUnavailableError(
        `set ${credentialSetId}: stored item is malformed (${result.fields})`,
      );
    }
    return result.state;
  }

  protected unavailable(
    operation: string,
    credentialSetId: string,
    error: unknown,
  ): TokenStoreUnavailableError {
    const reason = error instanceof Error ? error.name : 'unknown error';
    return new TokenStoreUnavailableError(
      `tokens table ${operation} for set ${credentialSetId} failed: ${reason}`,
      {
        cause: error,
      },
    );
  }
}
