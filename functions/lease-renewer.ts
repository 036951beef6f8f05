/**
 * The lease renewer of one Region of a two-Region stage (issue 27, docs/multi-region.md): EventBridge starts a
 * run every minute; it renews this Region's lease records (shared/regions/renewer.ts) every RENEW_MS until the
 * minute is nearly over. Built once per container: configuration (a wrong value fails the cold start with a
 * message naming it), the DynamoDB client.
 */
// First: stack traces through the source map, for errors in any module's init too.
import '../shared/install-source-mapped-stacks.js';
import type { Context } from 'aws-lambda';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { systemClock } from '../shared/clock.js';
import { brokerConfigContent, readBrokerConfig } from '../shared/config/broker-config.js';
import { optionalTableName, requiredEnv } from '../shared/config/env.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { LEARNED_TABLE_ENV } from '../shared/ledger/learned-store.js';
import { createPowertoolsTelemetry } from '../shared/observability.js';
import { LeaseStore } from '../shared/regions/lease-store.js';
import { LeaseRenewer, renewUntil } from '../shared/regions/renewer.js';
import { DynamoTokenReader } from '../shared/tokens/dynamo-token-reader.js';

const env = process.env;
const loaded = readBrokerConfig(env);
const sets = brokerConfigContent(loaded).sets;
const region = requiredEnv(env, 'OWN_REGION');
const dynamo = createDynamoDbClient();
const dynamoClock = attachDateReference(dynamo, systemClock);
const telemetry = createPowertoolsTelemetry();
telemetry.info('configuration loaded', {
  configRevision: loaded.revision,
  credentialSets: sets.length,
  region,
});

const renewer = new LeaseRenewer({
  region,
  sets,
  tokens: new DynamoTokenReader({ client: dynamo, tableName: requiredEnv(env, 'TOKENS_TABLE_NAME') }),
  ledger: new DynamoRateLedger({
    client: dynamo,
    tableName: requiredEnv(env, 'LEDGER_TABLE_NAME'),
    telemetry,
    reference: dynamoClock,
    regional: true,
    // The learned limits the vend functions of both Regions keep on the MRSC table: the rings to lease.
    learnedTableName: optionalTableName(env, LEARNED_TABLE_ENV),
  }),
  leases: new LeaseStore({ client: dynamo, tableName: requiredEnv(env, 'LEASE_TABLE_NAME') }),
  clock: systemClock,
  telemetry,
});

/** Stop this long before the function's timeout: the last renewal's writes must land within the run. */
const STOP_BEFORE_TIMEOUT_MS = 10_000;

export const handler = async (
  _event: unknown,
  context: Context,
): Promise<{ renewed: number; failed: number }> => {
  const stopAt = systemClock.now() + context.getRemainingTimeInMillis() - STOP_BEFORE_TIMEOUT_MS;
  const renewals = await renewUntil(
    renewer,
    systemClock,
    stopAt,
    (ms) => new Promise((r) => setTimeout(r, ms)),
  );
  const failed = renewals.filter((r) => r.outcome === 'failed').length;
  return { renewed: renewals.length - failed, failed };
};
