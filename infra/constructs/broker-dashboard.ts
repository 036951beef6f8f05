import { Duration } from 'aws-cdk-lib';
import {
  AlarmStatusWidget,
  Dashboard,
  GraphWidget,
  type IAlarm,
  type IWidget,
  MathExpression,
  TextWidget,
} from 'aws-cdk-lib/aws-cloudwatch';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { Metric as BrokerMetric, type MetricName } from '../../shared/metric-names.js';
import { setMetric, setSearch } from '../broker-metrics.js';
import type { StageConfig, StageCredentialSet } from '../stage-config.js';

export interface BrokerDashboardProps {
  stage: StageConfig;
  dashboardName: string;
  functions: Record<string, IFunction>;
  tables: Record<string, Table>;
  alarms: IAlarm[];
}

const PERIOD = Duration.minutes(5);
const WIDTH = 6;
const HEIGHT = 6;

/**
 * One row per credential set (token validity, logins by outcome, vending, permits and vendor feedback), then
 * the functions and the tables, with every alarm's state on top.
 */
export class BrokerDashboard extends Construct {
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: BrokerDashboardProps) {
    super(scope, id);
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(12),
    });
    this.dashboard.addWidgets(
      new AlarmStatusWidget({ title: 'Alarms', alarms: props.alarms, width: 24, height: 4 }),
    );
    for (const set of props.stage.credentialSets) this.dashboard.addWidgets(...setRow(set, props.stage));
    this.dashboard.addWidgets(
      new TextWidget({ markdown: '## Functions and tables', width: 24, height: 1 }),
      ...functionWidgets(props.functions),
      ...tableWidgets(props.tables),
    );
  }
}

function setRow(set: StageCredentialSet, stage: StageConfig): IWidget[] {
  const counts = (names: MetricName[]) =>
    names.map(
      (name) =>
        new MathExpression({
          expression: `SUM(${setSearch(name, set.id, 'Sum', PERIOD)})`,
          label: name,
          period: PERIOD,
        }),
    );
  return [
    new TextWidget({
      markdown: `## ${set.id}\n${set.environment} · ${set.companyRole} · ${set.vendorBaseUrl}`,
      width: 24,
      height: 2,
    }),
    new GraphWidget({
      title: `${set.id}: token validity left (s)`,
      left: [setMetric(BrokerMetric.TokenValiditySeconds, set.id, 'Minimum', PERIOD)],
      leftAnnotations: [
        { value: set.refresh.softThresholdSeconds, label: 'soft threshold' },
        { value: stage.alarms.tokenValiditySeconds, label: 'alarm', color: '#ff7f0e' },
        { value: set.refresh.hardFloorSeconds, label: 'hard floor', color: '#d62728' },
      ],
      width: WIDTH,
      height: HEIGHT,
    }),
    new GraphWidget({
      title: `${set.id}: logins`,
      left: counts([
        BrokerMetric.LoginSuccess,
        BrokerMetric.LoginFailure,
        BrokerMetric.CredentialsRejected,
        BrokerMetric.VendorUnavailable,
        BrokerMetric.EnvMismatch,
        BrokerMetric.LeaseContention,
      ]),
      right: [setMetric(BrokerMetric.NoUsableToken, set.id, 'Maximum', PERIOD)],
      width: WIDTH,
      height: HEIGHT,
    }),
    new GraphWidget({
      title: `${set.id}: vending and permits`,
      left: counts([BrokerMetric.TokensVended, BrokerMetric.PermitsGranted, BrokerMetric.PermitsDenied]),
      right: counts([BrokerMetric.TokenRejectionsReported, BrokerMetric.VendorRateLimitReported]),
      width: WIDTH,
      height: HEIGHT,
    }),
    new GraphWidget({
      title: `${set.id}: vend latency (ms), vendor clock skew (s)`,
      left: ['p50', 'p99'].map(
        (statistic) =>
          new MathExpression({
            expression: `MAX(${setSearch(BrokerMetric.VendLatency, set.id, statistic, PERIOD)})`,
            label: `VendLatency ${statistic}`,
            period: PERIOD,
          }),
      ),
      right: [setMetric(BrokerMetric.VendorClockSkewSeconds, set.id, 'Average', PERIOD)],
      width: WIDTH,
      height: HEIGHT,
    }),
  ];
}

function functionWidgets(functions: Record<string, IFunction>): IWidget[] {
  return Object.entries(functions).flatMap(([name, fn]) => [
    new GraphWidget({
      title: `${name}: invocations, errors, throttles`,
      left: [
        fn.metricInvocations({ period: PERIOD, statistic: 'Sum' }),
        fn.metricErrors({ period: PERIOD, statistic: 'Sum' }),
        fn.metricThrottles({ period: PERIOD, statistic: 'Sum' }),
      ],
      width: WIDTH,
      height: HEIGHT,
    }),
    new GraphWidget({
      title: `${name}: duration (ms)`,
      left: ['p50', 'p99', 'Maximum'].map((statistic) => fn.metricDuration({ period: PERIOD, statistic })),
      width: WIDTH,
      height: HEIGHT,
    }),
  ]);
}

function tableWidgets(tables: Record<string, Table>): IWidget[] {
  return Object.entries(tables).map(
    ([name, table]) =>
      new GraphWidget({
        title: `${name} table: capacity used and throttles`,
        left: [
          table.metricConsumedReadCapacityUnits({ period: PERIOD, statistic: 'Sum' }),
          table.metricConsumedWriteCapacityUnits({ period: PERIOD, statistic: 'Sum' }),
        ],
        right: [
          table.metric('ReadThrottleEvents', { period: PERIOD, statistic: 'Sum' }),
          table.metric('WriteThrottleEvents', { period: PERIOD, statistic: 'Sum' }),
        ],
        width: WIDTH * 2,
        height: HEIGHT,
      }),
  );
}
