import { type CredentialSetConfig, parseCredentialSets } from '../config/credential-sets.js';
import { requiredEnv } from '../config/env.js';
import { ConfigurationError } from '../errors.js';

export interface RefresherConfig {
  sets: CredentialSetConfig[];
  tokensTableName: string;
  /** Sets refreshed at once by a scheduled run. */
  concurrency: number;
}

/** The refresher's configuration from its environment, once at cold start; a wrong value names itself. */
export function loadRefresherConfig(env: Record<string, string | undefined>): RefresherConfig {
  const concurrencyText = env.REFRESH_CONCURRENCY?.trim() || '4';
  const concurrency = Number(concurrencyText);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32) {
    throw new ConfigurationError(
      'invalid configuration: REFRESH_CONCURRENCY must be an integer from 1 to 32',
    );
  }
  return {
    sets: parseCredentialSets(requiredEnv(env, 'CREDENTIAL_SETS'), 'CREDENTIAL_SETS'),
    tokensTableName: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    concurrency,
  };
}
