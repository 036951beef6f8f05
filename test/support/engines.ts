import { inject } from 'vitest';
import { externalDynamo, type LocalDynamo, startDynaliteServer } from './dynalite.js';
import { requireDynamoDbLocal } from './test-projects.js';

/**
 * The two DynamoDB engines the DynamoDB tests run on, one harness: `describe.each(ENGINES)('… on %s', …)` puts
 * the engine in every test name. They differ where it matters: DynamoDB Local (AWS's own engine) returns the
 * item with a failed condition when ReturnValuesOnConditionCheckFailure is ALL_OLD and validates expressions as
 * DynamoDB does; dynalite does neither.
 */
export const ENGINES = ['dynalite', 'DynamoDB Local'] as const;
export type Engine = (typeof ENGINES)[number];

/**
 * A fresh dynalite of this file, or the run's DynamoDB Local (test/global-setup.ts) with this file's tables. A file
 * that imports this module runs in the `dynamodb` vitest project, the one that starts DynamoDB Local
 * (test/support/test-projects.ts).
 */
export function startEngine(engine: Engine): Promise<LocalDynamo> {
  if (engine === 'dynalite') return startDynaliteServer();
  return Promise.resolve(externalDynamo(requireDynamoDbLocal(inject('dynamoDbLocalEndpoint'))));
}
