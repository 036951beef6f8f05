import type { AddressInfo } from 'node:net';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { createDynamoDbClient, createTable } from '../../shared/aws/dynamodb.js';

export interface LocalDynamo {
  endpoint: string;
  client: DynamoDBClient;
  /** Creates a table with a fresh unique name and returns the name. */
  createTable(prefix?: string): Promise<string>;
  close(): Promise<void>;
}

let tableCounter = 0;

/** An in-memory dynalite on 127.0.0.1 spoken to by the real @aws-sdk/client-dynamodb. */
export async function startDynalite(): Promise<LocalDynamo> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;
  const client = createDynamoDbClient({ endpoint });
  return {
    endpoint,
    client,
    async createTable(prefix = 'table') {
      const name = `${prefix}-${process.pid}-${++tableCounter}`;
      await createTable(client, name);
      return name;
    },
    async close() {
      client.destroy();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
