import { Duration } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';

export interface RefreshScheduleProps {
  target: IFunction;
  minutes: number;
}

/**
 * Runs the refresher every few minutes with the EventBridge scheduled event it expects. A delivery older than
 * one period is dropped: the next run does the same work.
 */
export class RefreshSchedule extends Construct {
  readonly rule: Rule;

  constructor(scope: Construct, id: string, props: RefreshScheduleProps) {
    super(scope, id);
    const period = Duration.minutes(props.minutes);
    this.rule = new Rule(this, 'Rule', {
      description: `token-broker: scheduled refresher run every ${props.minutes} min`,
      schedule: Schedule.rate(period),
      targets: [new LambdaFunction(props.target, { retryAttempts: 2, maxEventAge: period })],
    });
  }
}
