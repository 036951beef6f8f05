import type { StageInput } from '../stage-config.js';

/**
 * UAT: the vendor's UAT environment, a placeholder account, example consumers. Replace the account, the
 * consumers, operators, break-glass principals and the alarm targets with the real ones before the first
 * deploy (docs/deploying.md).
 */
export const uat = {
  name: 'uat',
  account: '111111111111',
  region: 'eu-west-1',
  vendorEnvironment: 'uat',
  production: false,
  credentialSets: [
    {
      id: 'uat-advisor',
      environment: 'uat',
      companyRole: 'advisor',
      vendorBaseUrl: 'https://uat.pms-vendor.example.com',
      secretName: 'token-broker/uat/advisor',
    },
    {
      id: 'uat-execution',
      environment: 'uat',
      companyRole: 'execution-platform',
      vendorBaseUrl: 'https://uat.pms-vendor.example.com',
      secretName: 'token-broker/uat/execution-platform',
    },
  ],
  consumers: [
    {
      name: 'portfolio-service',
      principalArn: 'arn:aws:iam::111111111111:role/portfolio-service-uat',
      credentialSets: ['uat-advisor', 'uat-execution'],
    },
    {
      name: 'reporting-service',
      principalArn: 'arn:aws:iam::111111111111:role/reporting-service-uat',
      credentialSets: ['uat-advisor'],
    },
    {
      // The pipeline's smoke test after each UAT deploy (infra/stages/pipeline.ts): one token, nothing else.
      name: 'pipeline-smoke-test',
      principalArn: 'arn:aws:iam::444444444444:role/token-broker-pipeline-smoke-test',
      credentialSets: ['uat-advisor'],
    },
  ],
  // The on-call role: `token-broker status` for every set, never a token (docs/runbook.md, Before you start).
  operators: [
    { name: 'oncall', principalArn: 'arn:aws:iam::111111111111:role/token-broker-oncall-uat', refresh: true },
  ],
  // Besides the refresher, only this role may read the vendor secrets (docs/runbook.md, Break-glass read).
  breakGlassPrincipals: ['arn:aws:iam::111111111111:role/token-broker-break-glass-uat'],
  alarms: {
    emails: ['token-broker-uat-alerts@example.com'],
  },
  logRetentionDays: 30,
  runbookUrl: 'https://git.example.com/platform/token-broker/blob/main/docs/runbook.md',
} satisfies StageInput;
