import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { tableDefinition } from './tables.js';

export interface DynamoDbClientOptions {
  /** A local endpoint (dynalite); unset in AWS. */
  endpoint?: string;
  region?: string;
}

/** A DynamoDB client for AWS, or for a local endpoint with dummy credentials. */
export function createDynamoDbClient(options: DynamoDbClientOptions = {}): DynamoDBClient {
  if (options.endpoint) {
    return new DynamoDBClient({
      endpoint: options.endpoint,
      region: options.region ?? 'local',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 3,
    });
  }
  return new DynamoDBClient({ region: options.region ?? process.env.AWS_REGION, maxAttempts: 3 });
}

/** Creates a broker table (local mode and tests; in AWS the CDK stack owns the tables). */
export async function createTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(new CreateTableCommand(tableDefinition(tableName)));
  // Poll briefly rather than use the SDK waiter: its first wait is a whole second, and dynalite is ready at once.
  for (let attempt = 0; attempt < 300; attempt++) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.TableStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`table ${tableName} did not become ACTIVE`);
}
