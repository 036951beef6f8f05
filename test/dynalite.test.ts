import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';

describe('dynalite harness', () => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it('serves a broker table through the real DynamoDB client', async () => {
    const table = await dynamo.createTable('tokens');
    await dynamo.client.send(
      new PutItemCommand({ TableName: table, Item: { pk: { S: 'set#a' }, purgeAt: { N: '1' } } }),
    );
    const got = await dynamo.client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: 'set#a' } } }),
    );
    expect(got.Item?.purgeAt?.N).toBe('1');
  });

  it('speaks to the server TEST_DYNAMO_ENDPOINT names instead, and leaves it running on close', async () => {
    const before = process.env.TEST_DYNAMO_ENDPOINT;
    process.env.TEST_DYNAMO_ENDPOINT = dynamo.endpoint;
    try {
      const external = await startDynalite();
      expect(external.endpoint).toBe(dynamo.endpoint);
      const tables = [await external.createTable('ext'), await external.createTable('ext')];
      expect(new Set(tables).size).toBe(2);
      await external.client.send(new PutItemCommand({ TableName: tables[0], Item: { pk: { S: 'set#b' } } }));
      await external.close();
      // The server is not ours to stop: it still answers, with what was written through the closed client.
      const got = await dynamo.client.send(
        new GetItemCommand({ TableName: tables[0], Key: { pk: { S: 'set#b' } } }),
      );
      expect(got.Item?.pk?.S).toBe('set#b');
    } finally {
      if (before === undefined) delete process.env.TEST_DYNAMO_ENDPOINT;
      else process.env.TEST_DYNAMO_ENDPOINT = before;
    }
  });
});
