/**
 * The lease renewer of one Region of a two-Region stage (issue 27, docs/multi-region.md): EventBridge starts a
 * run every minute; it renews this Region's lease records (shared/regions/renewer.ts) every RENEW_MS, and sooner
 * where its polls find the plan moved, until the minute is nearly over. Built once per container: configuration
 * (a wrong value fails the cold start with a message naming it), the DynamoDB client, and the renewer on it, whose
 * every decision is on ledger time (DynamoDB's clock as this container corrects to it, the same correction its
 * ledger uses: shared/regions/renewer-setup.ts); the container's own clock only paces the loop and the deadline.
 */
// First: stack traces through the source map, for errors in any module's init too.
import '../shared/install-source-mapped-stacks.js';
import type { Context } from 'aws-lambda';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { systemClock } from '../shared/clock.js';
import { brokerConfigContent, readBrokerConfig } from '../shared/config/broker-config.js';
import { optionalTableName, requiredEnv } from '../shared/config/env.js';
import { LEARNED_TABLE_ENV } from '../shared/ledger/learned-store.js';
import { createPowertoolsTelemetry } from '../shared/observability.js';
import { renewUntil } from '../shared/regions/renewer.js';
import { createLeaseRenewer } from '../shared/regions/renewer-setup.js';

const env = process.env;
const loaded = readBrokerConfig(env);
const sets = brokerConfigContent(loaded).sets;
const region = requiredEnv(env, 'OWN_REGION');
const telemetry = createPowertoolsTelemetry();
telemetry.info('configuration loaded', {
  configRevision: loaded.revision,
  credentialSets: sets.length,
  region,
});

const renewer = createLeaseRenewer({
  client: createDynamoDbClient(),
  local: systemClock,
  region,
  sets,
  tables: {
    ledger: requiredEnv(env, 'LEDGER_TABLE_NAME'),
    tokens: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    leases: requiredEnv(env, 'LEASE_TABLE_NAME'),
    learned: optionalTableName(env, LEARNED_TABLE_ENV),
  },
  telemetry,
});

/** Stop this long before the function's timeout: the last renewal's writes must land within the run. */
const STOP_BEFORE_TIMEOUT_MS = 10_000;

export const handler = async (
  _event: unknown,
  context: Context,
): Promise<{ renewed: number; failed: number; refused: number }> => {
  const stopAt = systemClock.now() + context.getRemainingTimeInMillis() - STOP_BEFORE_TIMEOUT_MS;
  const renewals = await renewUntil(
    renewer,
    systemClock,
    stopAt,
    (ms) => new Promise((r) => setTimeout(r, ms)),
  );
  const count = (outcome: string) => renewals.filter((r) => r.outcome === outcome).length;
  return { renewed: count('renewed'), failed: count('failed'), refused: count('refused') };
};
