import type { Stack } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { BrokerFunction } from './constructs/broker-function.js';
import type { StageConfig } from './stage-config.js';

/**
 * Only the refresher reads credentials, and only the stage's own secrets: GetSecretValue (which also returns
 * the VersionId the refresher compares), on each secret's ARN, nothing else. The secrets are referenced by
 * name; their values never enter the template. Secrets encrypted with the default aws/secretsmanager key need
 * no kms:Decrypt grant; a secret under a customer-managed key would also need kms:Decrypt on that key.
 */
export function refresherSecretAccess(stack: Stack, refresher: BrokerFunction, stage: StageConfig): string[] {
  const names = [...new Set(stage.credentialSets.map((set) => set.secretName))];
  // A secret's ARN ends in "-" and six random characters; "??????" matches exactly those, where "*" would
  // also match other secrets whose names start with this one.
  const arns = names.map(
    (name, index) => `${Secret.fromSecretNameV2(stack, `CredentialsSecret${index}`, name).secretArn}-??????`,
  );
  refresher.addToRolePolicy(
    new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: arns }),
  );
  return arns;
}
