import { type ConsumerConfig, parseConsumers } from '../config/consumers.js';
import { type CredentialSetConfig, parseCredentialSets } from '../config/credential-sets.js';
import { requiredEnv } from '../config/env.js';

export interface VendConfig {
  sets: CredentialSetConfig[];
  consumers: ConsumerConfig[];
  tokensTableName: string;
  ledgerTableName: string;
  refresherFunctionName: string;
}

/** The vend function's configuration from its environment, once at cold start; a wrong value names itself. */
export function loadVendConfig(env: Record<string, string | undefined>): VendConfig {
  const sets = parseCredentialSets(requiredEnv(env, 'CREDENTIAL_SETS'), 'CREDENTIAL_SETS');
  return {
    sets,
    consumers: parseConsumers(
      requiredEnv(env, 'CONSUMERS'),
      sets.map((set) => set.id),
      'CONSUMERS',
    ),
    tokensTableName: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    ledgerTableName: requiredEnv(env, 'LEDGER_TABLE_NAME'),
    refresherFunctionName: requiredEnv(env, 'REFRESHER_FUNCTION_NAME'),
  };
}
