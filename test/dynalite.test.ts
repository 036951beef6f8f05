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
});
