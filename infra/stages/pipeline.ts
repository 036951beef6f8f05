import type { PipelineInput } from '../pipeline-config.js';

/**
 * The optional pipeline (`TokenBroker-pipeline`, docs/deploying.md): a placeholder tooling account and
 * connection. Replace the account, the connection ARN and the repository with the real ones before
 * `cdk deploy TokenBroker-pipeline`; the smoke-test role's ARN is a consumer of the UAT stage (uat.ts).
 */
export const pipeline = {
  account: '444444444444',
  region: 'eu-west-1',
  connectionArn:
    'arn:aws:codeconnections:eu-west-1:444444444444:connection/00000000-0000-0000-0000-000000000000',
  repository: 'example-org/token-broker',
  branch: 'main',
  uatStage: 'uat',
  prodStage: 'prod',
  smokeTest: { credentialSet: 'uat-advisor', roleName: 'token-broker-pipeline-smoke-test' },
} satisfies PipelineInput;
