import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

/**
 * Both tables (tokens, ledger) have one string partition key and a TTL attribute in Unix seconds.
 * TTL deletes lazily (and dynalite never does), so every read checks expiry itself.
 * The CDK stack declares the same key and TTL attribute.
 */
export const PARTITION_KEY = 'pk';
export const TTL_ATTRIBUTE = 'purgeAt';

export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: PARTITION_KEY, AttributeType: 'S' }],
    KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  };
}
