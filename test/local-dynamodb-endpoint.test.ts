import { type ChildProcess, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { paginateListTables, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LOCAL_LEDGER_TABLE, LOCAL_TOKENS_TABLE, startLocalBroker } from '../local/broker.js';
import { loadLocalConfig } from '../local/config.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { startBrokerProcess } from './support/local-broker-process.js';

const run = promisify(execFile);

/**
 * BROKER_DYNAMODB_ENDPOINT: the local broker on an external DynamoDB, here the run's DynamoDB Local (AWS's
 * engine), instead of its own dynalite. The broker's two tables are the only ones of these names in the run.
 */
describe('npm start on DynamoDB Local (BROKER_DYNAMODB_ENDPOINT)', () => {
  const endpoint = inject('dynamoDbLocalEndpoint');
  const client = createDynamoDbClient({ endpoint });
  /** Every table of the run's DynamoDB Local: ListTables answers 100 at a time, and other files make many. */
  const tables = async () => {
    const names: string[] = [];
    for await (const page of paginateListTables({ client }, {})) names.push(...(page.TableNames ?? []));
    return names;
  };
  let broker: { child: ChildProcess; banner: string };
  let before: string[];

  beforeAll(async () => {
    before = await tables();
    broker = await startBrokerProcess({
      BROKER_PORT: '0',
      LOG_LEVEL: 'warn',
      BROKER_DYNAMODB_ENDPOINT: endpoint,
    });
  }, 120_000);
  afterAll(() => {
    if (broker?.child.exitCode === null) broker.child.kill('SIGKILL');
    client.destroy();
  });

  it('creates its tables there, keeps its tokens there, and vends a token', async () => {
    expect(before).not.toContain(LOCAL_TOKENS_TABLE);
    expect(await tables()).toEqual(expect.arrayContaining([LOCAL_TOKENS_TABLE, LOCAL_LEDGER_TABLE]));
    expect(broker.banner).toContain(`DynamoDB: ${endpoint} (external;`);
    expect(broker.banner).not.toMatch(/^dynalite:/m);
    expect(broker.banner).toMatch(/uat-advisor\s+token ready/);
    const command = /^ {2}(curl .+)$/m.exec(broker.banner)?.[1];
    const { stdout } = await run('bash', ['-c', command ?? 'false']);
    const body = JSON.parse(stdout) as Record<string, unknown>;
    expect(body.credentialSet).toBe('uat-advisor');
    expect(typeof body.accessToken).toBe('string');
    // The token the broker vended is the one in DynamoDB Local's table.
    const { Items } = await client.send(new ScanCommand({ TableName: LOCAL_TOKENS_TABLE }));
    const stored = Items?.find((item) => item.credentialSetId?.S === 'uat-advisor');
    expect(stored?.current?.M?.accessToken?.S).toBe(body.accessToken);
  });

  it('starts again on the tables it finds there, and stops without stopping the endpoint', async () => {
    const exited = new Promise<number | null>((resolve) => broker.child.on('exit', (code) => resolve(code)));
    broker.child.kill('SIGINT');
    expect(await exited).toBe(0);
    const config = loadLocalConfig({ BROKER_PORT: '0', BROKER_DYNAMODB_ENDPOINT: endpoint });
    const again = await startLocalBroker(config, { telemetry: new MemoryTelemetry(), schedule: false });
    try {
      expect(again.dynamoEndpoint).toBe(endpoint);
      const summary = await again.refreshNow();
      expect(summary.sets.find((set) => set.credentialSetId === 'uat-advisor')?.usable).toBe(true);
    } finally {
      await again.close();
    }
    expect(await tables()).toContain(LOCAL_TOKENS_TABLE);
  });

  it('refuses a malformed endpoint, and a dynalite data folder beside an endpoint, naming the setting', () => {
    expect(() => loadLocalConfig({ BROKER_DYNAMODB_ENDPOINT: '127.0.0.1:8000' })).toThrow(/dynamoDbEndpoint/);
    expect(() => loadLocalConfig({ BROKER_DYNAMODB_ENDPOINT: endpoint, BROKER_DATA_DIR: '/tmp/x' })).toThrow(
      /BROKER_DATA_DIR.*BROKER_DYNAMODB_ENDPOINT/,
    );
  });
});
