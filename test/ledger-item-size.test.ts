import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { fillLedgerItem } from './support/ledger-harness.js';
import { takesTurn } from './support/property-runs.js';

/**
 * The ledger item at its largest, for the plans the vendor's limits call for (vendor-api.md section 8): the
 * general limits alone, reports and rebalancing, and four classes of 25 a minute and 500 an hour. Each is filled
 * as full as it gets (every slot of every ring holding grants, every id, spent receipt and cap slot taken) through
 * the real codec and a real full write, measured by DynamoDB's size rules, and held to the plan's computed bound
 * and to one write unit.
 */
const hourly = (minute: number, hour: number) => [
  { limit: minute, windowSeconds: 60 },
  { limit: hour, windowSeconds: 3600 },
];
const CASES: [name: string, limits: RateLimitSettings, format: 1 | 2][] = [
  ['the general limits alone', rateLimitSettingsSchema.parse({}), 1],
  [
    'reports 10/min + rebalancing 20/h',
    rateLimitSettingsSchema.parse({
      classes: {
        reports: [{ limit: 10, windowSeconds: 60 }],
        rebalancing: [{ limit: 20, windowSeconds: 3600 }],
      },
    }),
    2,
  ],
  [
    'four classes of 25/min + 500/h',
    rateLimitSettingsSchema.parse({
      classes: {
        reports: hourly(25, 500),
        rebalancing: hourly(25, 500),
        'bulk-orders': hourly(25, 500),
        exports: hourly(25, 500),
      },
    }),
    2,
  ],
];

describe.each(ENGINES)('ledger item size on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });

  it.each(CASES.filter((_, turn) => takesTurn(engine, ENGINES, turn, 'the other engine')))(
    '%s: filled as full as it gets, within its computed bound and one write unit',
    async (name, limits, format) => {
      expect(planFor(limits).itemFormat).toBe(format);
      const tableName = await dynamo.createTable('ledger');
      const { largest, bound } = await fillLedgerItem({ client, tableName, limits, hours: 1.1 });
      console.info(
        `ledger item, ${name} (format ${format}) on ${engine}: measured ${largest} B, computed bound ${bound} B, ${Math.ceil(
          largest / 1024,
        )} write unit(s)`,
      );
      expect(largest).toBeGreaterThan(0.6 * bound);
      expect(largest).toBeLessThanOrEqual(bound);
      expect(bound).toBeLessThanOrEqual(1024);
    },
    180_000,
  );
});
