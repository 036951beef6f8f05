/**
 * The refresher function: run by a schedule (every set), and invoked synchronously by the vend function
 * (one set, on demand). Built once per container, at module scope: configuration (a wrong value fails the
 * cold start with a message naming it), the AWS clients, the vendor clients per base URL.
 */
// First: stack traces through the source map, for errors in any module's init too.
import '../shared/install-source-mapped-stacks.js';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { systemClock } from '../shared/clock.js';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { SecretsManagerCredentialsSource } from '../shared/credentials/secrets-manager-credentials-source.js';
import { createPowertoolsTelemetry } from '../shared/observability.js';
import { DynamoTokenStore } from '../shared/tokens/dynamo-token-store.js';
import { Refresher } from '../shared/tokens/refresher.js';
import { loadRefresherConfig } from '../shared/tokens/refresher-config.js';
import { VendorClient } from '../shared/vendor-client/client.js';
import { createRefresherHandler } from './refresher-handler.js';

const config = loadRefresherConfig(process.env);
const telemetry = createPowertoolsTelemetry();
telemetry.info('configuration loaded', {
  configRevision: config.revision,
  credentialSets: config.sets.length,
});
const dynamo = createDynamoDbClient();
// Every answer of this client tells DynamoDB's clock (the ledger's), on the clock the vendor's Date is read with:
// a login's vendor clock offset is stored against it, for the rate ledger.
const dynamoClock = attachDateReference(dynamo, systemClock);
const vendorClients = new Map(
  config.sets.map((set) => [set.vendorBaseUrl, new VendorClient({ baseUrl: set.vendorBaseUrl, telemetry })]),
);

const refresher = new Refresher({
  sets: config.sets,
  store: new DynamoTokenStore({ client: dynamo, tableName: config.tokensTableName }),
  credentials: new SecretsManagerCredentialsSource({
    client: new SecretsManagerClient({ region: process.env.AWS_REGION, maxAttempts: 3 }),
  }),
  vendorFor: (set: CredentialSetConfig) => vendorClients.get(set.vendorBaseUrl) as VendorClient,
  clock: systemClock,
  dynamoClock,
  telemetry,
  concurrency: config.concurrency,
});

export const handler = createRefresherHandler({ refresher, telemetry, logger: telemetry.logger });
