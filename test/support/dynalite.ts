import { randomBytes } from 'node:crypto';
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

/**
 * An in-memory dynalite on 127.0.0.1 spoken to by the real @aws-sdk/client-dynamodb.
 *
 * Opt-in: with `TEST_DYNAMO_ENDPOINT` set (e.g. `http://127.0.0.1:8000`, AWS's DynamoDB Local started with
 * `-inMemory -sharedDb`), no dynalite is started and the same interface speaks to that endpoint instead, so DynamoDB
 * code can be checked on both engines (they differ: DynamoDB Local returns the item on a failed condition with
 * ReturnValuesOnConditionCheckFailure ALL_OLD and validates expressions more strictly). The server is shared and
 * outlives the run: table names then also carry a random per-process id, and `close()` only destroys the client.
 */
export async function startDynalite(): Promise<LocalDynamo> {
  const external = process.env.TEST_DYNAMO_ENDPOINT;
  if (external) return externalDynamo(external);
  return startDynaliteServer();
}

/** Always a dynalite of this process, whatever TEST_DYNAMO_ENDPOINT says (see engines.ts). */
export async function startDynaliteServer(): Promise<LocalDynamo> {
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

/** Tables from earlier runs stay in a shared server, and a pid can come back: names get this run's id too. */
const runId = randomBytes(4).toString('hex');

/** A server this process does not own (DynamoDB Local, or TEST_DYNAMO_ENDPOINT): its own tables, never stopped. */
export function externalDynamo(endpoint: string): LocalDynamo {
  const client = createDynamoDbClient({ endpoint });
  return {
    endpoint,
    client,
    async createTable(prefix = 'table') {
      const name = `${prefix}-${process.pid}-${runId}-${++tableCounter}`;
      await createTable(client, name);
      return name;
    },
    async close() {
      client.destroy();
    },
  };
}
