import { brokerConfigContent, readBrokerConfig } from '../config/broker-config.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { requiredEnv } from '../config/env.js';
import { ConfigurationError } from '../errors.js';

export interface RefresherConfig {
  /** The configuration document's revision (shared/config/broker-config.ts), for the cold-start log line. */
  revision: string;
  sets: CredentialSetConfig[];
  tokensTableName: string;
  /** Sets refreshed at once by a scheduled run. */
  concurrency: number;
}

/**
 * The refresher's configuration, once at cold start: the credential sets from its configuration document
 * (broker-config.json, see brokerConfigContent), the rest from its environment; a wrong value names itself.
 */
export function loadRefresherConfig(env: Record<string, string | undefined>): RefresherConfig {
  const concurrencyText = env.REFRESH_CONCURRENCY?.trim() || '4';
  const concurrency = Number(concurrencyText);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32) {
    throw new ConfigurationError(
      'invalid configuration: REFRESH_CONCURRENCY must be an integer from 1 to 32',
    );
  }
  const loaded = readBrokerConfig(env);
  return {
    revision: loaded.revision,
    sets: brokerConfigContent(loaded).sets,
    tokensTableName: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    concurrency,
  };
}
