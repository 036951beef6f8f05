import { ConfigurationError } from '../errors.js';

/** A Lambda environment variable the function cannot start without; its absence names it. */
export function requiredEnv(env: Record<string, string | undefined>, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigurationError(`invalid configuration: environment variable ${name} is not set`);
  return value;
}
