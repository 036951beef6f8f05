import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal } from './support/dynamodb-local.js';

/**
 * One DynamoDB Local for the whole run, shared by every file that runs on both engines (test/support/engines.ts):
 * each file's tables carry its pid and a run id, so files never meet. No Java fails the run, naming what to
 * install: an engine is never skipped silently.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = performance.now();
  const server = await startDynamoDbLocal();
  console.log(
    `DynamoDB Local (pid ${server.pid}) answering at ${server.endpoint} after ${Math.round(performance.now() - started)} ms`,
  );
  project.provide('dynamoDbLocalEndpoint', server.endpoint);
  return () => server.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The endpoint of the run's DynamoDB Local (see test/global-setup.ts). */
    dynamoDbLocalEndpoint: string;
  }
}
