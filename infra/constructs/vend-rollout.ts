import { Validations } from 'aws-cdk-lib';
import type { IAlarm } from 'aws-cdk-lib/aws-cloudwatch';
import { LambdaDeploymentConfig, LambdaDeploymentGroup } from 'aws-cdk-lib/aws-codedeploy';
import { Alias, type Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { VendDeployment } from '../stage-config.js';

/** The alias the Function URL serves: consumers reach whatever version it points at. */
export const VEND_ALIAS = 'live';

export interface VendRolloutProps {
  fn: LambdaFunction;
  deployment: VendDeployment;
}

/**
 * Safe rollouts of the vend function: every change of its code or configuration publishes a version, and
 * CodeDeploy moves the `live` alias to it gradually (the stage's `rollout.vendDeployment`), watching the
 * rollback alarms. An alarm firing during the shift, or a failed deployment, puts the alias back on the
 * previous version; CloudFormation then rolls the stack update back too. Old versions are kept (the default
 * removal policy of a Lambda version), so there is always one to go back to.
 */
export class VendRollout extends Construct {
  readonly alias: Alias;
  readonly deploymentGroup: LambdaDeploymentGroup;

  constructor(scope: Construct, id: string, props: VendRolloutProps) {
    super(scope, id);
    this.alias = new Alias(this, 'Alias', { aliasName: VEND_ALIAS, version: props.fn.currentVersion });
    this.deploymentGroup = new LambdaDeploymentGroup(this, 'Deployment', {
      alias: this.alias,
      deploymentConfig: LambdaDeploymentConfig[props.deployment],
      autoRollback: { failedDeployment: true, deploymentInAlarm: true, stoppedDeployment: true },
    });
    Validations.of(this.deploymentGroup.role).acknowledge({
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSCodeDeployRoleForLambdaLimited]',
      reason:
        "CodeDeploy's own service role for Lambda deployments, created by LambdaDeploymentGroup: the AWS managed " +
        'policy AWSCodeDeployRoleForLambdaLimited reads alarm states and gets/updates aliases, and can invoke ' +
        'only functions named CodeDeployHook_* and publish only to topics named CodeDeployTopic_* (neither ' +
        'exists here). AWS keeps it in step with what CodeDeploy calls; only CodeDeploy can assume the role.',
    });
  }

  /** The alarms that stop a deployment and put the alias back on the previous version. */
  rollBackOn(alarms: readonly IAlarm[]): void {
    for (const alarm of alarms) this.deploymentGroup.addAlarm(alarm);
  }
}
