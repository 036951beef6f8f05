import { ConfigurationError } from '../errors.js';

/** A Lambda environment variable the function cannot start without; its absence names it. */
export function requiredEnv(env: Record<string, string | undefined>, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigurationError(`invalid configuration: environment variable ${name} is not set`);
  return value;
}

/** DynamoDB's rule for a table's name: 3 to 255 letters, digits, `_`, `-` and `.`. */
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

/**
 * An optional table name: unset or empty is undefined; anything that cannot name a DynamoDB table fails the cold
 * start naming the variable (a typo must not reach the first request as a ResourceNotFoundException).
 */
export function optionalTableName(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = env[name]?.trim();
  if (!value) return undefined;
  if (!TABLE_NAME.test(value))
    throw new ConfigurationError(
      `invalid configuration: environment variable ${name} must be a DynamoDB table name (3 to 255 of A-Z, a-z, 0-9, _ - .), not ${JSON.stringify(value.slice(0, 80))}`,
    );
  return value;
}
