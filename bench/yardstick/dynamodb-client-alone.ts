/**
 * The bundles bench's yardstick: what the DynamoDB client alone costs at cold start, bundled the way the
 * functions are (infra/constructs/broker-function.ts). A client built at module scope, as the AWS SDK's
 * documentation advises for Lambda (reused across invocations), and the code path of one GetItem; nothing of ours.
 */
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';

const client = new DynamoDBClient({});

export const handler = async (): Promise<unknown> =>
  client.send(new GetItemCommand({ TableName: 'table', Key: { pk: { S: 'key' } } }));
