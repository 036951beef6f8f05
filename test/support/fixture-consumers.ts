import type { ConsumerConfig } from '../../shared/config/consumers.js';

/**
 * Consumer rules for the callers of the Function URL events in test/fixtures/function-url: an assumed
 * role, a role with a path, an IAM user with a path, a role of another account. Raw input, for parseConsumers.
 */
export const fixtureConsumers = {
  portfolio: {
    name: 'portfolio',
    principalArn: 'arn:aws:iam::123456789012:role/portfolio-service',
    credentialSets: ['uat-advisor'],
  },
  reporting: {
    name: 'reporting',
    principalArn: 'arn:aws:iam::123456789012:role/service-role/reporting-service',
    credentialSets: ['uat-execution'],
  },
  batch: {
    name: 'batch',
    principalArn: 'arn:aws:iam::123456789012:user/ops/batch-runner',
    credentialSets: ['uat-advisor'],
  },
  gateway: {
    name: 'gateway',
    principalArn: 'arn:aws:iam::210987654321:role/execution-gateway',
    credentialSets: ['uat-execution'],
  },
} satisfies Record<string, ConsumerConfig>;
