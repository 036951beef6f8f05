import { type CredentialSetConfig, parseCredentialSets } from '../config/credential-sets.js';
import { ConfigurationError } from '../errors.js';

export interface RefresherConfig {
  sets: CredentialSetConfig[];
  tokensTableName: string;
  /** Sets refreshed at once by a scheduled run. */
  concurrency: number;
}

/** The refresher's configuration from its environment, once at cold start; a wrong value names itself. */
export function loadRefresherConfig(env: Record<string, string | undefined>): RefresherConfig {
  const required = (name: string): string => {
    const value = env[name]?.trim();
    if (!value)
      throw new ConfigurationError(`invalid configuration: environment variable ${name} is not set`);
    return value;
  };
  const concurrencyText = env.REFRESH_CONCURRENCY?.trim() || '4';
  const concurrency = Number(concurrencyText);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32) {
    throw new ConfigurationError(
      'invalid configuration: REFRESH_CONCURRENCY must be an integer from 1 to 32',
    );
  }
  return {
    sets: parseCredentialSets(required('CREDENTIAL_SETS'), 'CREDENTIAL_SETS'),
    tokensTableName: required('TOKENS_TABLE_NAME'),
    concurrency,
  };
}
