import { brokerConfigContent, readBrokerConfig } from '../config/broker-config.js';
import type { ConsumerConfig } from '../config/consumers.js';
import { type CredentialSetConfig, parseConfig } from '../config/credential-sets.js';
import { optionalTableName, requiredEnv } from '../config/env.js';
import type { OperatorConfig } from '../config/operators.js';
import { ConfigurationError } from '../errors.js';
import { LEARNED_TABLE_ENV } from '../ledger/learned-store.js';
import {
  DEFAULT_REPORT_LIMITS,
  type ReportLimitSettings,
  reportLimitSettingsSchema,
} from './report-limits.js';

export interface VendConfig {
  /** The configuration document's revision (shared/config/broker-config.ts), for the cold-start log line. */
  revision: string;
  sets: CredentialSetConfig[];
  consumers: ConsumerConfig[];
  /** Principals that may read the list (status) route only; none when the document has none. */
  operators: OperatorConfig[];
  tokensTableName: string;
  ledgerTableName: string;
  refresherFunctionName: string;
  /** REPORT_LIMITS (JSON, optional): the report limits; unset fields keep their defaults (report-limits.ts). */
  reportLimits: ReportLimitSettings;
  /**
   * LEDGER_REGIONAL (`true`, or unset: false): the ledger is one Region's of a two-Region stage
   * (docs/multi-region.md), so a ledger item without its Region's share grants only the floor (DynamoRateLedger
   * `regional`). Unset: as in a one-Region stage.
   */
  ledgerRegional: boolean;
  /**
   * LEARNED_TABLE_NAME (optional): the table of the learned class limits, set in a two-Region stage only (the MRSC
   * table: both Regions learn into and serve one view, docs/multi-region.md). Unset: the ledger table, as before.
   */
  learnedTableName?: string;
}

/** The vend function's environment variable that makes its ledger a Region's (infra/broker-stack.ts sets it). */
export const LEDGER_REGIONAL_ENV = 'LEDGER_REGIONAL';

function ledgerRegional(env: Record<string, string | undefined>): boolean {
  const value = env[LEDGER_REGIONAL_ENV]?.trim();
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw new ConfigurationError(
    `invalid configuration: environment variable ${LEDGER_REGIONAL_ENV} must be "true" or "false", not ${JSON.stringify(value)}`,
  );
}

/**
 * The vend function's configuration, once at cold start: the credential sets, consumers and operators from its
 * configuration document (broker-config.json, see brokerConfigContent), the rest from its environment; a wrong
 * value names itself.
 */
export function loadVendConfig(env: Record<string, string | undefined>): VendConfig {
  const loaded = readBrokerConfig(env);
  return {
    revision: loaded.revision,
    ...brokerConfigContent(loaded),
    tokensTableName: requiredEnv(env, 'TOKENS_TABLE_NAME'),
    ledgerTableName: requiredEnv(env, 'LEDGER_TABLE_NAME'),
    refresherFunctionName: requiredEnv(env, 'REFRESHER_FUNCTION_NAME'),
    reportLimits: env.REPORT_LIMITS?.trim()
      ? parseConfig(reportLimitSettingsSchema, env.REPORT_LIMITS.trim(), 'REPORT_LIMITS')
      : DEFAULT_REPORT_LIMITS,
    ledgerRegional: ledgerRegional(env),
    learnedTableName: optionalTableName(env, LEARNED_TABLE_ENV),
  };
}
