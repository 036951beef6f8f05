// The consumer's side of "Giving a consumer access" (docs/deploying.md) in CDK: the service's role may call the
// broker stage's vend Function URL. test/consumer-iam.test.ts synthesizes this file and checks the policy.
import { aws_iam as iam, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/** The broker stage a service calls: its account and Region, and its stack output `VendFunctionName`. */
export interface BrokerStage {
  account: string;
  region: string;
  vendFunctionName: string;
}

/**
 * Lets `grantee` (the service's role) call the stage's vend Function URL: the identity policy every consumer
 * needs, whatever account it is in (the URL's resource policy grants accounts, not roles). Which credential sets
 * it may use is not here: that is the stage's `consumers` entry naming the role.
 */
export function allowTokenBroker(grantee: iam.IGrantable, stage: BrokerStage): void {
  grantee.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      // A Function URL call is authorised as both actions, on the alias behind the URL (`live`).
      actions: ['lambda:InvokeFunctionUrl', 'lambda:InvokeFunction'],
      resources: [`arn:aws:lambda:${stage.region}:${stage.account}:function:${stage.vendFunctionName}:live`],
      // Only through the URL (IAM auth): no direct Invoke of the function.
      conditions: { Bool: { 'lambda:InvokedViaFunctionUrl': 'true' } },
    }),
  );
}

/** A service's stack: its Lambda role, with access to the UAT broker. */
export class PortfolioServiceStack extends Stack {
  readonly role: iam.Role;

  constructor(scope: Construct, id: string, props: StackProps & { broker: BrokerStage }) {
    super(scope, id, props);
    this.role = new iam.Role(this, 'ServiceRole', {
      // The name the stage's consumers entry has in its principalArn.
      roleName: 'portfolio-service-uat',
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    });
    allowTokenBroker(this.role, props.broker);
  }
}
