import { StackChecksUnavailableError } from '../errors.js';

/**
 * Stands in for infra/broker-app.ts in the CLI package (packaging/build.ts resolves that import here), so the
 * package needs no aws-cdk-lib: `check-config` then skips the stack's own checks and says so.
 */
export function createBrokerApp(): never {
  throw new StackChecksUnavailableError('the CDK app is not part of the CLI package');
}
