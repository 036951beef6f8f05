import { ArnFormat, Stack } from 'aws-cdk-lib';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription, UrlSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import type { AlarmSettings } from '../stage-config.js';

export interface AlarmTopicProps {
  /** The broker's key: the topic is encrypted at rest with it. */
  key: IKey;
  alarms: AlarmSettings;
  /** Every alarm that notifies the topic is named `<alarmNamePrefix>-…` (BrokerAlarms' namePrefix). */
  alarmNamePrefix: string;
}

/** The SNS topic every alarm notifies, encrypted, TLS-only, with the stage's people and tools subscribed. */
export class AlarmTopic extends Construct {
  readonly topic: Topic;

  constructor(scope: Construct, id: string, props: AlarmTopicProps) {
    super(scope, id);
    const stack = Stack.of(this);
    this.topic = new Topic(this, 'Topic', {
      displayName: 'token-broker alarms',
      masterKey: props.key,
      enforceSSL: true,
    });
    // CloudWatch publishes as its service principal, on behalf of an alarm. Only this stack's alarms (by their
    // name prefix, in this account and Region) may make it publish here: the confused-deputy conditions AWS
    // documents for service principals.
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: {
        'aws:SourceArn': stack.formatArn({
          service: 'cloudwatch',
          resource: 'alarm',
          resourceName: `${props.alarmNamePrefix}-*`,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      },
    };
    // enforceSSL gives the topic a policy of its own (the TLS deny), which replaces SNS's default policy: without
    // this statement CloudWatch may not publish, and every alarm would fire in silence.
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        sid: 'AllowThisStacksAlarmsToPublish',
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: fromOurAlarms,
      }),
    );
    // CloudWatch publishes alarm notifications itself, so it must be able to use the topic's key (an AWS
    // managed key would refuse it). In a key policy, "*" means this key. The same source conditions: AWS
    // documents them for service principals' use of a topic's key (not for EventBridge, which is not used here).
    props.key.addToResourcePolicy(
      new PolicyStatement({
        sid: 'AllowCloudWatchAlarmsToPublishToTheEncryptedTopic',
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromOurAlarms,
      }),
    );
    for (const email of props.alarms.emails) this.topic.addSubscription(new EmailSubscription(email));
    for (const url of props.alarms.httpsEndpoints) this.topic.addSubscription(new UrlSubscription(url));
  }
}
