/**
 * The vend-token function behind the Function URL (IAM auth). Everything is built once per container, at
 * module scope: configuration (a wrong value fails the cold start with a message naming it), the AWS clients,
 * the in-memory token cache inside the handler.
 */
// First: stack traces through the source map, for errors in any module's init too.
import '../shared/install-source-mapped-stacks.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { SignedLambdaInvoker } from '../shared/aws/lambda-invoke.js';
import { systemClock } from '../shared/clock.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { createPowertoolsTelemetry } from '../shared/observability.js';
import { DynamoTokenReader } from '../shared/tokens/dynamo-token-reader.js';
import { LambdaRefreshInvoker } from '../shared/vend/lambda-refresh-invoker.js';
import { loadVendConfig } from '../shared/vend/vend-config.js';
import { createVendHandler } from '../shared/vend/vend-handler.js';

const configStarted = performance.now();
const config = loadVendConfig(process.env);
const configLoadMs = performance.now() - configStarted;
const dynamo = createDynamoDbClient();
// Every answer of this client tells the ledger DynamoDB's clock: the one all vend containers share.
const dynamoClock = attachDateReference(dynamo, systemClock);
const telemetry = createPowertoolsTelemetry();
telemetry.info('configuration loaded', {
  configRevision: config.revision,
  credentialSets: config.sets.length,
  consumers: config.consumers.length,
  operators: config.operators.length,
  configLoadMs: Math.round(configLoadMs * 10) / 10,
});

export const handler = createVendHandler({
  sets: config.sets,
  consumers: config.consumers,
  operators: config.operators,
  store: new DynamoTokenReader({ client: dynamo, tableName: config.tokensTableName }),
  ledger: new DynamoRateLedger({
    client: dynamo,
    tableName: config.ledgerTableName,
    telemetry,
    reference: dynamoClock,
    // A two-Region stage's: held to the share its Region's lease renewer adopted, the floor without one.
    regional: config.ledgerRegional,
    // A two-Region stage's: the learned limits on the MRSC table, one view for both Regions (unset: the ledger's).
    learnedTableName: config.learnedTableName,
  }),
  // The vend function may not read credentials: re-logins are the refresher's, by synchronous invoke.
  reports: { client: dynamo, tableName: config.ledgerTableName, settings: config.reportLimits },
  refresher: new LambdaRefreshInvoker({
    client: new SignedLambdaInvoker({
      region: process.env.AWS_REGION ?? '',
      endpoint: process.env.AWS_ENDPOINT_URL_LAMBDA,
      maxAttempts: 2,
    }),
    functionName: config.refresherFunctionName,
  }),
  clock: systemClock,
  telemetry,
});
