/**
 * This repository's runbook on the Git host: where alarm descriptions of a non-production stage point unless
 * the stage names another `runbookUrl` (production stages must name theirs).
 */
export const REPOSITORY_RUNBOOK_URL =
  'https://git.example.com/platform/token-broker/blob/main/docs/runbook.md';

/**
 * The sections of docs/runbook.md that alarms point to. The anchors are the ones a Markdown renderer derives
 * from each section's heading; a test checks that every anchor exists in the runbook.
 */
export const RunbookSection = {
  NoUsableToken: 'no-usable-token',
  TokenValidityLow: 'token-validity-low',
  CredentialsRejected: 'credentials-rejected',
  VendorUnavailable: 'vendor-unavailable',
  EnvMismatch: 'env-mismatch',
  VendorRateLimited: 'vendor-429-reported-by-consumers',
  ClassLimitBelowConfigured: 'class-limit-below-its-configuration',
  ClassLimitRaised: 'class-limit-raised',
  PermitDenials: 'permit-denials-sustained',
  FunctionErrors: 'function-errors',
  FunctionThrottles: 'function-throttles',
  FunctionDuration: 'function-duration-near-timeout',
  DynamoDbErrors: 'dynamodb-throttles-or-system-errors',
  RefresherNotRunning: 'refresher-not-running',
  VendServerErrors: 'vend-5xx-answers',
  VendLatency: 'vend-latency-high',
  CanaryRollback: 'a-canary-rollback-happened',
  LedgerClockSkew: 'ledger-clock-skew',
  LeaseRenewalsRefused: 'lease-renewals-refused',
  LeaseRenewalsFailing: 'lease-renewals-failing',
} as const;
export type RunbookAnchor = (typeof RunbookSection)[keyof typeof RunbookSection];

/** What an on-call person reads in the alarm: what it means, then where to go. */
export function alarmDescription(meaning: string, runbookUrl: string, anchor: RunbookAnchor): string {
  return `${meaning} Runbook: ${runbookUrl}#${anchor}`;
}
