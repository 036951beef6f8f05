import { App, CfnResource, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AttributeType, Table } from 'aws-cdk-lib/aws-dynamodb';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { BrokerAlarms } from '../../infra/constructs/broker-alarms.js';
import { BrokerDashboard } from '../../infra/constructs/broker-dashboard.js';
import { parseStageConfig, type StageConfig, type StageInput } from '../../infra/stage-config.js';
import type { Json } from './infra-template.js';

/** A CloudWatch alarm as CloudFormation holds it. */
export interface AlarmProperties {
  AlarmName: string;
  AlarmDescription: string;
  AlarmActions: unknown[];
  OKActions: unknown[];
  ComparisonOperator: string;
  Threshold: number;
  EvaluationPeriods: number;
  DatapointsToAlarm: number;
  TreatMissingData: string;
  MetricName?: string;
  Namespace?: string;
  Statistic?: string;
  Period?: number;
  Dimensions?: { Name: string; Value: string }[];
  Metrics?: { Id: string; Expression?: string; Period?: number; ReturnData?: boolean; Label?: string }[];
}

/** What the monitoring constructs of one stage synthesize to, built apart from BrokerStack. */
export interface Monitoring {
  stage: StageConfig;
  template: Template;
  alarms: AlarmProperties[];
  /** CloudFormation resources the two constructs add (not the topic, functions and tables they are given). */
  ownResources: number;
  /** The dashboard body as CloudWatch receives it (the template holds it as an Fn::Join of ARNs). */
  dashboardBody: { widgets: Json[] };
  /** The body's size in bytes as deployed (each alarm ARN resolved). */
  dashboardBodyBytes: number;
  topicId: string;
}

const cfnResourcesOf = (construct: Construct): number =>
  construct.node.findAll().filter((c) => c instanceof CfnResource).length;

/**
 * BrokerAlarms and BrokerDashboard of a stage in a plain stack with a topic, two functions and two tables of
 * their own (inline code: nothing is bundled), wired as BrokerStack wires them.
 */
export function synthesizeMonitoring(input: StageInput): Monitoring {
  const stage = parseStageConfig(input);
  const stack = new Stack(new App(), `TokenBroker-${stage.name}`, {
    env: { account: stage.account, region: stage.region },
  });
  const fn = (id: string) =>
    new LambdaFunction(stack, id, {
      runtime: Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: Code.fromInline('exports.handler = async () => {};'),
    });
  const table = (id: string) =>
    new Table(stack, id, { partitionKey: { name: 'pk', type: AttributeType.STRING } });
  const topic = new Topic(stack, 'Topic');
  const refresher = fn('Refresher');
  const vend = fn('Vend');
  const tables = { tokens: table('Tokens'), ledger: table('Ledger') };
  const alarmSet = new BrokerAlarms(stack, 'AlarmSet', {
    stage,
    namePrefix: stack.stackName,
    topic,
    refresher: { fn: refresher, timeout: Duration.seconds(60) },
    vend: { fn: vend, alias: vend.addAlias('live'), timeout: Duration.seconds(10) },
    tables,
  });
  const dashboard = new BrokerDashboard(stack, 'Dashboard', {
    stage,
    dashboardName: stack.stackName,
    functions: { refresher, vend },
    tables,
    alarms: alarmSet.alarms,
  });
  const template = Template.fromStack(stack);
  const json = template.toJSON() as { Resources: Record<string, { Type: string; Properties: Json }> };
  const alarms = Object.values(json.Resources)
    .filter((r) => r.Type === 'AWS::CloudWatch::Alarm')
    .map((r) => r.Properties as unknown as AlarmProperties);
  const dashboards = Object.values(json.Resources).filter((r) => r.Type === 'AWS::CloudWatch::Dashboard');
  if (dashboards.length !== 1) throw new Error(`expected one dashboard, found ${dashboards.length}`);
  const body = resolveBody(dashboards[0]?.Properties.DashboardBody, stage, stack.stackName, json.Resources);
  return {
    stage,
    template,
    alarms,
    ownResources: cfnResourcesOf(alarmSet) + cfnResourcesOf(dashboard),
    dashboardBody: JSON.parse(body),
    dashboardBodyBytes: Buffer.byteLength(body),
    topicId: stack.getLogicalId(topic.node.defaultChild as CfnResource),
  };
}

const PSEUDO = (stage: StageConfig): Record<string, string> => ({
  'AWS::Region': stage.region,
  'AWS::AccountId': stage.account,
  'AWS::Partition': 'aws',
  'AWS::URLSuffix': 'amazonaws.com',
});

/**
 * The body string a deployment would send: the Fn::Join's literal parts, pseudo parameters, each alarm's ARN
 * for its name, and each other resource's name as CloudFormation generates one (stack name, logical id and a
 * 12-character suffix: longer than the real ones of Lambda and DynamoDB, so the size is not understated).
 */
function resolveBody(
  body: unknown,
  stage: StageConfig,
  stackName: string,
  resources: Record<string, { Type: string; Properties: Json }>,
): string {
  if (typeof body === 'string') return body;
  const join = (body as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (!join) throw new Error(`unexpected dashboard body ${JSON.stringify(body).slice(0, 200)}`);
  return join[1]
    .map((part) => {
      if (typeof part === 'string') return part;
      const ref = (part as { Ref?: string }).Ref;
      if (ref !== undefined) {
        const pseudo = PSEUDO(stage)[ref];
        if (pseudo !== undefined) return pseudo;
        if (resources[ref]) return `${stackName}-${ref}-ABCDEFGHIJKL`;
      }
      const [id, attribute] = (part as { 'Fn::GetAtt'?: [string, string] })['Fn::GetAtt'] ?? [];
      const name = resources[id ?? '']?.Properties.AlarmName;
      if (attribute === 'Arn' && typeof name === 'string') {
        return `arn:aws:cloudwatch:${stage.region}:${stage.account}:alarm:${name}`;
      }
      throw new Error(`unexpected part of the dashboard body ${JSON.stringify(part)}`);
    })
    .join(join[0]);
}
