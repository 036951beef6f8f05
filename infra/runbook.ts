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
  PermitDenials: 'permit-denials-sustained',
  FunctionErrors: 'function-errors',
  FunctionThrottles: 'function-throttles',
  FunctionDuration: 'function-duration-near-timeout',
  DynamoDbErrors: 'dynamodb-throttles-or-system-errors',
  RefresherNotRunning: 'refresher-not-running',
} as const;
export type RunbookAnchor = (typeof RunbookSection)[keyof typeof RunbookSection];

/** What an on-call person reads in the alarm: what it means, then where to go. */
export function alarmDescription(meaning: string, runbookUrl: string, anchor: RunbookAnchor): string {
  return `${meaning} Runbook: ${runbookUrl}#${anchor}`;
}
