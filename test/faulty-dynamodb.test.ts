import {
  ConditionalCheckFailedException,
  GetItemCommand,
  InternalServerError,
  ProvisionedThroughputExceededException,
  PutItemCommand,
  ReplicatedWriteConflictException,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import {
  createFaultyDynamoDbClient,
  type FaultyDynamoDb,
  type FaultyDynamoDbOptions,
} from './support/faulty-dynamodb.js';

describe.each(ENGINES)('faulty DynamoDB client against %s', (engine) => {
  let dynamo: LocalDynamo;
  let table: string;
  const opened: FaultyDynamoDb[] = [];
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    await dynamo.close();
  });
  afterEach(() => {
    for (const { client } of opened.splice(0)) client.destroy();
  });

  async function faulty(options: Omit<FaultyDynamoDbOptions, 'endpoint'> = {}): Promise<FaultyDynamoDb> {
    table = await dynamo.createTable('faulty');
    const made = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, ...options });
    opened.push(made);
    return made;
  }
  const key = { pk: { S: 'counter' } };
  const addOne = () =>
    new UpdateItemCommand({
      TableName: table,
      Key: key,
      UpdateExpression: 'ADD n :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    });
  /** Read through the harness's clean client: what is really in the table. */
  const storedN = async () =>
    (await dynamo.client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item
      ?.n?.N;

  it('a lost answer of an applied ADD is re-sent by the SDK and applied twice', async () => {
    const { client, faults } = await faulty();
    faults.script('lostAnswer');
    const answer = await client.send(addOne());
    expect(answer.$metadata.attempts).toBe(2);
    expect(await storedN()).toBe('2');
    expect(faults.stats).toMatchObject({ sent: 2, lostAnswer: 1, throttle: 0, serverError: 0 });
    expect(faults.stats.byCommand.UpdateItem).toEqual({
      sent: 2,
      lostAnswer: 1,
      throttle: 0,
      serverError: 0,
    });
  });

  it('when every answer is lost, each attempt is applied and the caller sees the transient error', async () => {
    const { client, faults } = await faulty({ lostAnswer: 1, maxAttempts: 3 });
    const error = await client.send(addOne()).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'TimeoutError', code: 'ECONNRESET', $metadata: { attempts: 3 } });
    expect(await storedN()).toBe('3');
    expect(faults.stats).toMatchObject({ sent: 3, lostAnswer: 3 });
  });

  it('a conditional update whose answer is lost comes back as ConditionalCheckFailed although it applied', async () => {
    const { client, faults } = await faulty();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key, version: { N: '1' } } }));
    faults.script('lostAnswer');
    const error = await client
      .send(
        new UpdateItemCommand({
          TableName: table,
          Key: key,
          UpdateExpression: 'SET version = :next',
          ConditionExpression: 'version = :seen',
          ExpressionAttributeValues: { ':seen': { N: '1' }, ':next': { N: '2' } },
        }),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConditionalCheckFailedException);
    expect((error as ConditionalCheckFailedException).$metadata.attempts).toBe(2);
    const stored = await dynamo.client.send(
      new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
    );
    expect(stored.Item?.version?.N).toBe('2');
  });

  it.each([
    ['throttle', ProvisionedThroughputExceededException, 400],
    ['serverError', InternalServerError, 500],
  ] as const)(
    'a %s is not applied, is retried, and the call succeeds on a clean attempt',
    async (fault, type, status) => {
      const { client, faults } = await faulty();
      faults.script(fault, fault);
      const answer = await client.send(addOne());
      expect(answer.$metadata.attempts).toBe(3);
      expect(await storedN()).toBe('1');
      expect(faults.stats).toMatchObject({ sent: 1, lostAnswer: 0, [fault]: 2 });

      faults.set({ [fault]: 1 });
      const error = await client.send(addOne()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(type);
      expect(error).toMatchObject({ $metadata: { httpStatusCode: status, attempts: 3 } });
      expect(await storedN()).toBe('1');
      expect(faults.stats).toMatchObject({ sent: 1, [fault]: 5 });
    },
  );

  it("an MRSC conflict refuses a conditional write unapplied, as the SDK's error after its retries; nothing else", async () => {
    const { client, faults } = await faulty();
    const addOneIfBelow = (max: number) =>
      new UpdateItemCommand({
        TableName: table,
        Key: key,
        UpdateExpression: 'ADD n :one',
        ConditionExpression: 'attribute_not_exists(n) OR n < :max',
        ExpressionAttributeValues: { ':one': { N: '1' }, ':max': { N: String(max) } },
      });
    faults.script('replicatedWriteConflict', 'replicatedWriteConflict', 'replicatedWriteConflict');
    const error = await client.send(addOneIfBelow(5)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplicatedWriteConflictException);
    expect(error).toMatchObject({ $metadata: { httpStatusCode: 400, attempts: 3 } });
    expect(await storedN()).toBeUndefined();
    expect(faults.stats.sent).toBe(0);
    expect(faults.stats.log.filter((a) => a.fault === 'replicatedWriteConflict')).toHaveLength(3);
    // Once only: the SDK's retry is applied.
    faults.script('replicatedWriteConflict');
    await client.send(addOneIfBelow(5));
    expect(await storedN()).toBe('1');
    // A write without a condition is no place for it: the test that aims it there is wrong.
    faults.script('replicatedWriteConflict');
    await expect(client.send(addOne())).rejects.toThrow(/for conditional writes, not this UpdateItem/);
  });

  it('lost answers touch writes only, and faults stay on the chosen commands', async () => {
    const { client, faults } = await faulty({ lostAnswer: 1 });
    await client
      .send(new PutItemCommand({ TableName: table, Item: { ...key, n: { N: '7' } } }))
      .catch(() => {});
    const read = await client.send(new GetItemCommand({ TableName: table, Key: key }));
    expect(read.Item?.n?.N).toBe('7');
    expect(faults.stats.byCommand.GetItem).toEqual({ sent: 1, lostAnswer: 0, throttle: 0, serverError: 0 });

    faults.set({ throttle: 1, commands: ['UpdateItem'] });
    expect((await client.send(new GetItemCommand({ TableName: table, Key: key }))).Item?.n?.N).toBe('7');
    await expect(client.send(addOne())).rejects.toBeInstanceOf(ProvisionedThroughputExceededException);

    faults.off();
    faults.resetStats();
    await client.send(addOne());
    expect(await storedN()).toBe('8');
    expect(faults.stats).toMatchObject({ sent: 1, lostAnswer: 0, throttle: 0, serverError: 0 });
    expect(faults.stats.log).toEqual([{ command: 'UpdateItem' }]);
  });

  it('aims a fault at the attempts a predicate picks, wherever they fall among the others', async () => {
    const { client, faults } = await faulty({ throttle: 1, commands: ['GetItem'] });
    const other = { pk: { S: 'other' } };
    const addOneTo = (target: typeof key) =>
      new UpdateItemCommand({
        TableName: table,
        Key: target,
        UpdateExpression: 'ADD n :one',
        ExpressionAttributeValues: { ':one': { N: '1' } },
      });
    faults.aim(
      ({ command, input }) => command === 'UpdateItem' && (input.Key as typeof key).pk.S === 'other',
      'lostAnswer',
    );
    await client.send(addOneTo(key));
    await client.send(addOneTo(other));
    await client.send(addOneTo(other));
    await client.send(addOneTo(key));
    // Only the first write to `other` lost its answer (and was applied twice); the aim is then used up.
    expect(await storedN()).toBe('2');
    const otherN = await dynamo.client.send(
      new GetItemCommand({ TableName: table, Key: other, ConsistentRead: true }),
    );
    expect(otherN.Item?.n?.N).toBe('3');
    expect(faults.stats.log.map((entry) => entry.fault)).toEqual([
      undefined,
      'lostAnswer',
      undefined,
      undefined,
      undefined,
    ]);
    // An aim overrides `commands`, and `off()` clears it.
    faults.aim(({ command }) => command === 'UpdateItem', 'throttle', 'throttle', 'throttle');
    faults.off();
    await client.send(addOneTo(key));
    expect(await storedN()).toBe('3');
  });

  it('random faults: the same seed gives the same sequence, counted consistently', async () => {
    const rates = { lostAnswer: 0.2, throttle: 0.15, serverError: 0.15, maxAttempts: 4 };
    const run = async (seed: number) => {
      const { client, faults } = await faulty({ seed, ...rates });
      let succeeded = 0;
      for (let call = 0; call < 40; call++)
        if (
          await client.send(addOne()).then(
            () => true,
            () => false,
          )
        )
          succeeded++;
      return { stats: structuredClone(faults.stats), stored: Number(await storedN()), succeeded };
    };
    const first = await run(7);
    const again = await run(7);
    const other = await run(8);
    expect(again).toEqual(first);
    expect(other.stats.log).not.toEqual(first.stats.log);

    for (const { stats, stored } of [first, other]) {
      const injected = (fault: string) => stats.log.filter((entry) => entry.fault === fault).length;
      expect(stats.lostAnswer).toBe(injected('lostAnswer'));
      expect(stats.throttle).toBe(injected('throttle'));
      expect(stats.serverError).toBe(injected('serverError'));
      expect(stats.sent).toBe(stats.log.length - stats.throttle - stats.serverError);
      // SDK retries pass through the faults too: more attempts than calls.
      expect(stats.log.length).toBeGreaterThan(40);
      // Every attempt that reached dynalite applied its ADD, lost answer or not.
      expect(stored).toBe(stats.sent);
      expect(stats.lostAnswer).toBeGreaterThan(0);
      expect(stats.throttle).toBeGreaterThan(0);
      expect(stats.serverError).toBeGreaterThan(0);
    }
    // A call succeeds on its one clean attempt; every other attempt that reached dynalite lost its answer.
    expect(first.stored).toBe(first.succeeded + first.stats.lostAnswer);
  });

  it('refuses rates that are not probabilities', async () => {
    const { faults } = await faulty();
    expect(() => faults.set({ throttle: 0.6, serverError: 0.5 })).toThrow(RangeError);
    expect(() => faults.set({ lostAnswer: -0.1 })).toThrow(RangeError);
    expect(() => createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, throttle: Number.NaN })).toThrow(
      RangeError,
    );
  });
});
