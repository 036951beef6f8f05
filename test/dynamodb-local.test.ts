import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ConditionalCheckFailedException,
  ListTablesCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type LocalDynamo, startDynaliteServer } from './support/dynalite.js';
import { javaCommand } from './support/dynamodb-local.js';
import { ENGINES, startEngine } from './support/engines.js';

/** A failed condition with ALL_OLD: the item as it was (DynamoDB), or nothing (dynalite). */
async function failedConditionItem(dynamo: LocalDynamo, table: string) {
  await dynamo.client.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'k' }, v: { N: '1' } } }));
  const error = await dynamo.client
    .send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: 'k' } },
        UpdateExpression: 'SET v = :two',
        ConditionExpression: 'v = :two',
        ExpressionAttributeValues: { ':two': { N: '2' } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    )
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ConditionalCheckFailedException);
  return (error as ConditionalCheckFailedException).Item;
}

describe.each(ENGINES)('the DynamoDB engine %s', (engine) => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(() => dynamo.close());

  it('serves a broker table through the real DynamoDB client, on 127.0.0.1', async () => {
    expect(new URL(dynamo.endpoint).hostname).toBe('127.0.0.1');
    const table = await dynamo.createTable('engine');
    const { TableNames } = await dynamo.client.send(new ListTablesCommand({}));
    expect(TableNames).toContain(table);
  });

  it(`${engine === 'dynalite' ? 'never returns' : 'returns'} the item with a failed condition (ALL_OLD)`, async () => {
    const item = await failedConditionItem(dynamo, await dynamo.createTable('engine'));
    if (engine === 'dynalite') expect(item).toBeUndefined();
    else expect(item).toEqual({ pk: { S: 'k' }, v: { N: '1' } });
  });
});

describe('DynamoDB Local is not reachable from other interfaces', () => {
  it('listens on 127.0.0.1 only (the launcher rebinds the jar, which would listen on every interface)', () => {
    const { port } = new URL(inject('dynamoDbLocalEndpoint'));
    // The listening sockets of the port, as the kernel lists them: one, bound to the loopback address.
    const listening = spawnSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' });
    if (listening.error) throw listening.error;
    const locals = listening.stdout
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[3]);
    expect(locals).toEqual([expect.stringMatching(new RegExp(`^(\\[::ffff:)?127\\.0\\.0\\.1\\]?:${port}$`))]);
  });
});

describe('without Java', () => {
  it('the suite refuses to start, naming what to install', () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'no-java-'));
    try {
      expect(() => javaCommand({ PATH: empty })).toThrow(/needs a Java runtime.*openjdk-17-jre-headless/);
      expect(() => javaCommand({ PATH: process.env.PATH, JAVA_HOME: empty })).toThrow(/openjdk-17/);
      // A java too old to run the jar is refused the same way.
      symlinkSync('/bin/false', path.join(empty, 'java'));
      expect(() => javaCommand({ PATH: empty })).toThrow(/Java runtime, 17 or newer/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe('dynalite server', () => {
  it('is dynalite whatever TEST_DYNAMO_ENDPOINT says, so the engine in a test name is the one it ran on', async () => {
    const before = process.env.TEST_DYNAMO_ENDPOINT;
    process.env.TEST_DYNAMO_ENDPOINT = inject('dynamoDbLocalEndpoint');
    try {
      const dynamo = await startDynaliteServer();
      expect(dynamo.endpoint).not.toBe(process.env.TEST_DYNAMO_ENDPOINT);
      expect(await failedConditionItem(dynamo, await dynamo.createTable('engine'))).toBeUndefined();
      await dynamo.close();
    } finally {
      if (before === undefined) delete process.env.TEST_DYNAMO_ENDPOINT;
      else process.env.TEST_DYNAMO_ENDPOINT = before;
    }
  });
});
