import type { StageInput } from '../stage-config.js';

/**
 * Production: the vendor's Production environment, a placeholder account, example consumers. Replace the
 * account, the consumers, operators, break-glass principals and the alarm targets with the real ones before
 * the first deploy (docs/deploying.md).
 */
export const prod = {
  name: 'prod',
  account: '222222222222',
  region: 'eu-west-1',
  vendorEnvironment: 'prod',
  production: true,
  credentialSets: [
    {
      id: 'prod-advisor',
      environment: 'prod',
      companyRole: 'advisor',
      vendorBaseUrl: 'https://api.pms-vendor.example.com',
      secretName: 'token-broker/prod/advisor',
    },
    {
      id: 'prod-execution',
      environment: 'prod',
      companyRole: 'execution-platform',
      vendorBaseUrl: 'https://api.pms-vendor.example.com',
      secretName: 'token-broker/prod/execution-platform',
    },
  ],
  consumers: [
    {
      name: 'portfolio-service',
      principalArn: 'arn:aws:iam::222222222222:role/portfolio-service',
      credentialSets: ['prod-advisor', 'prod-execution'],
    },
    {
      name: 'reporting-service',
      principalArn: 'arn:aws:iam::222222222222:role/reporting-service',
      credentialSets: ['prod-advisor'],
    },
    {
      // A consumer in another account: its own account must also allow it to call the URL (docs/deploying.md).
      name: 'trading-gateway',
      principalArn: 'arn:aws:iam::333333333333:role/trading-gateway',
      credentialSets: ['prod-execution'],
    },
  ],
  // The on-call role: `token-broker status` for every set, never a token (docs/runbook.md, Before you start).
  operators: [
    { name: 'oncall', principalArn: 'arn:aws:iam::222222222222:role/token-broker-oncall', refresh: true },
  ],
  // Besides the refresher, only this role may read the vendor secrets (docs/runbook.md, Break-glass read).
  breakGlassPrincipals: ['arn:aws:iam::222222222222:role/token-broker-break-glass'],
  alarms: {
    emails: ['token-broker-oncall@example.com'],
    httpsEndpoints: ['https://events.incidents.example.com/integration/token-broker-prod/sns'],
  },
  logRetentionDays: 365,
  // The runbook as the Git host shows it: alarm descriptions link its sections (required for production).
  runbookUrl: 'https://git.example.com/platform/token-broker/blob/main/docs/runbook.md',
} satisfies StageInput;
