import { type ConsumerConfig, parseConsumers } from '../config/consumers.js';
import { type CredentialSetConfig, parseCredentialSets } from '../config/credential-sets.js';
import { ConfigurationError } from '../errors.js';

export interface VendConfig {
  sets: CredentialSetConfig[];
  consumers: ConsumerConfig[];
  tokensTableName: string;
  ledgerTableName: string;
  refresherFunctionName: string;
}

function required(env: Record<string, string | undefined>, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigurationError(`invalid configuration: environment variable ${name} is not set`);
  return value;
}

/** The vend function's configuration from its environment, once at cold start; a wrong value names itself. */
export function loadVendConfig(env: Record<string, string | undefined>): VendConfig {
  const sets = parseCredentialSets(required(env, 'CREDENTIAL_SETS'), 'CREDENTIAL_SETS');
  return {
    sets,
    consumers: parseConsumers(
      required(env, 'CONSUMERS'),
      sets.map((set) => set.id),
      'CONSUMERS',
    ),
    tokensTableName: required(env, 'TOKENS_TABLE_NAME'),
    ledgerTableName: required(env, 'LEDGER_TABLE_NAME'),
    refresherFunctionName: required(env, 'REFRESHER_FUNCTION_NAME'),
  };
}
