import { type ConsumerConfig, parseConsumers } from '../config/consumers.js';
import { type CredentialSetConfig, parseConfig, parseCredentialSets } from '../config/credential-sets.js';
import { requiredEnv } from '../config/env.js';
import { type OperatorConfig, parseOperators } from '../config/operators.js';
import { type ReportLimitSettings, reportLimitSettingsSchema } from './report-limits.js';

export interface VendConfig {
  sets: CredentialSetConfig[];
  consumers: ConsumerConfig[];
  /** OPERATORS (JSON, optional: none): principals that may read the list (status) route only. */
  operators: OperatorConfig[];
  tokensTableName: string;
  ledgerTableName: string;
  refresherFunctionName: string;
  /** REPORT_LIMITS (JSON, optional): the report limits; unset fields keep their defaults (report-limits.ts). */
  reportLimits: ReportLimitSettings;
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
    operators: parseOperators(
      env.OPERATORS?.trim() || [],
      sets.map((set) => set.id),
      'OPERATORS',
    ),
    tokensTableName: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    ledgerTableName: requiredEnv(env, 'LEDGER_TABLE_NAME'),
    refresherFunctionName: requiredEnv(env, 'REFRESHER_FUNCTION_NAME'),
    reportLimits: parseConfig(reportLimitSettingsSchema, env.REPORT_LIMITS?.trim() || {}, 'REPORT_LIMITS'),
  };
}
