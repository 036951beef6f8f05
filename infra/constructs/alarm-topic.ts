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
}

/** The SNS topic every alarm notifies, encrypted, TLS-only, with the stage's people and tools subscribed. */
export class AlarmTopic extends Construct {
  readonly topic: Topic;

  constructor(scope: Construct, id: string, props: AlarmTopicProps) {
    super(scope, id);
    this.topic = new Topic(this, 'Topic', {
      displayName: 'token-broker alarms',
      masterKey: props.key,
      enforceSSL: true,
    });
    // CloudWatch publishes alarm notifications itself, so it must be able to use the topic's key (an AWS
    // managed key would refuse it). In a key policy, "*" means this key.
    props.key.addToResourcePolicy(
      new PolicyStatement({
        sid: 'AllowCloudWatchAlarmsToPublishToTheEncryptedTopic',
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
      }),
    );
    for (const email of props.alarms.emails) this.topic.addSubscription(new EmailSubscription(email));
    for (const url of props.alarms.httpsEndpoints) this.topic.addSubscription(new UrlSubscription(url));
  }
}
