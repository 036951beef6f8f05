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
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { Metric as BrokerMetric, DIMENSION_ERROR_CODE, type MetricName } from '../../shared/metric-names.js';
import {
  consumerInsightsQuery,
  PER_SET_ALARMS_MAX_SETS,
  perSetMonitoring,
  type SetInsightsQueryOptions,
  setInsightsQuery,
  setMetric,
  setSearch,
  TOP_CONSUMERS,
} from '../broker-metrics.js';
import type { StageConfig, StageCredentialSet } from '../stage-config.js';

export interface BrokerDashboardProps {
  stage: StageConfig;
  dashboardName: string;
  functions: Record<string, IFunction>;
  /** As BrokerAlarms takes them: by role, the table that holds that role's items, in this stack's Region. */
  tables: Record<string, ITable>;
  /** What a table is, said in its widget's title, where it is not the stack's own table. */
  tableNotes?: Partial<Record<string, string>>;
  alarms: IAlarm[];
}

const PERIOD = Duration.minutes(5);
/** An alarm status widget lists at most 100 alarms (CloudWatch's dashboard body structure). */
const ALARM_STATUS_WIDGET_MAX_ALARMS = 100;
/** Sets per graph of a large stage: the worst ones, so that a line can be read and named. */
const WORST_SETS = 10;
/** CloudWatch's dynamic label for a series' default label (of a grouped query's series: its group's values). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: CloudWatch's dynamic label syntax, meant literally.
const SERIES_LABEL = '${LABEL}';
const WIDTH = 6;
const HEIGHT = 6;
/** CloudWatch draws at most 500 series in one graph widget. */
export const GRAPH_WIDGET_MAX_SERIES = 500;
/** The permit metrics each consumer widget draws, a series of each per consumer (granted, returned, denied). */
const PERMIT_LINES = [
  [BrokerMetric.PermitsGranted, 'granted'],
  [BrokerMetric.PermitsReturned, 'returned'],
  [BrokerMetric.PermitsDenied, 'denied'],
] as const;
/** Consumers a set's widget draws at most: three series each, within the widget's 500. */
export const CONSUMERS_PER_SET_WIDGET_MAX = Math.floor(GRAPH_WIDGET_MAX_SERIES / PERMIT_LINES.length);

/**
 * Every alarm's state on top; then one row per credential set (token validity, logins by outcome, vending,
 * permits and vendor feedback), or for a stage of more than PER_SET_ALARMS_MAX_SETS sets graphs across all
 * sets that show the worst ones; then the functions and the tables.
 */
export class BrokerDashboard extends Construct {
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: BrokerDashboardProps) {
    super(scope, id);
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(12),
    });
    this.dashboard.addWidgets(...alarmStatusWidgets(props.alarms));
    if (perSetMonitoring(props.stage.credentialSets.length)) {
      for (const set of props.stage.credentialSets) this.dashboard.addWidgets(...setRow(set, props.stage));
    } else {
      this.dashboard.addWidgets(...allSetsRows(props.stage));
    }
    this.dashboard.addWidgets(
      new TextWidget({ markdown: '## Functions and tables', width: 24, height: 1 }),
      ...functionWidgets(props.functions),
      ...tableWidgets(props.tables, props.tableNotes ?? {}),
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
      left: [
        ...counts([BrokerMetric.TokensVended]),
        // Exactly the per-set series: a SEARCH would add the per-consumer ones (PERMIT_METRICS) a second time.
        ...[BrokerMetric.PermitsGranted, BrokerMetric.PermitsReturned, BrokerMetric.PermitsDenied].map(
          (name) => setMetric(name, set.id, 'Sum', PERIOD).with({ label: name }),
        ),
      ],
      right: counts([
        BrokerMetric.TokenRejectionsReported,
        BrokerMetric.VendorRateLimitReported,
        BrokerMetric.ClassLimitBelowConfigured,
        BrokerMetric.ClassLimitRaised,
      ]),
      width: WIDTH,
      height: HEIGHT,
    }),
    permitsPerConsumer(set, stage),
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

/**
 * One set's permits per consumer: granted, returned and denied, a line each per consumer (the per-consumer
 * series, Metrics Insights grouped by Consumer). Every consumer the config lets use the set, up to
 * CONSUMERS_PER_SET_WIDGET_MAX (the busiest when a set has more): within a graph's 500 series.
 */
function permitsPerConsumer(set: StageCredentialSet, stage: StageConfig): IWidget {
  const consumers = stage.consumers.filter((c) => c.credentialSets.includes(set.id)).length;
  const limit = Math.max(1, Math.min(consumers, CONSUMERS_PER_SET_WIDGET_MAX));
  return new GraphWidget({
    title:
      consumers > limit
        ? `${set.id}: permits per consumer (the ${limit} busiest of ${consumers})`
        : `${set.id}: permits per consumer`,
    left: PERMIT_LINES.map(
      ([name, what]) =>
        new MathExpression({
          expression: consumerInsightsQuery(name, { setId: set.id, limit }),
          label: `${SERIES_LABEL} ${what}`,
          period: PERIOD,
        }),
    ),
    width: WIDTH,
    height: HEIGHT,
  });
}

/**
 * A large stage's permits per consumer: the TOP_CONSUMERS consumer and set pairs with the most permits
 * granted, returned and denied in the time range, each line named by its set and consumer. One widget, 30
 * series, whatever the number of sets and consumers; one pair's figures: `token-broker status --consumers`.
 */
function permitsPerConsumerAllSets(): IWidget {
  return new GraphWidget({
    title: `Permits per consumer: the ${TOP_CONSUMERS} highest consumer and set pairs`,
    left: PERMIT_LINES.map(
      ([name, what]) =>
        new MathExpression({
          expression: consumerInsightsQuery(name, { limit: TOP_CONSUMERS }),
          label: `${SERIES_LABEL} ${what}`,
          period: PERIOD,
        }),
    ),
    width: WIDTH,
    height: HEIGHT,
  });
}

/** Every alarm's state, in widgets of at most 100 alarms each (one widget for a small stage, as before). */
function alarmStatusWidgets(alarms: IAlarm[]): IWidget[] {
  const chunks: IAlarm[][] = [];
  for (let i = 0; i < alarms.length; i += ALARM_STATUS_WIDGET_MAX_ALARMS) {
    chunks.push(alarms.slice(i, i + ALARM_STATUS_WIDGET_MAX_ALARMS));
  }
  return chunks.map(
    (chunk, i) =>
      new AlarmStatusWidget({
        title: chunks.length === 1 ? 'Alarms' : `Alarms (${i + 1} of ${chunks.length})`,
        alarms: chunk,
        width: 24,
        height: 4,
      }),
  );
}

/**
 * A large stage's sets: one graph per metric over all of them, each drawing the WORST_SETS sets with the
 * worst values in the time range (a Metrics Insights query grouped by set, ORDER BY and LIMIT), each line
 * named by its set. A fixed number of widgets whatever the number of sets.
 */
function allSetsRows(stage: StageConfig): IWidget[] {
  const worst = (
    name: MetricName,
    statistic: string,
    order: SetInsightsQueryOptions['order'],
    limit = WORST_SETS,
    extraDimensions: string[] = [],
    labelSuffix = '',
  ) =>
    new MathExpression({
      expression: setInsightsQuery(name, { statistic, order, limit, extraDimensions }),
      // A grouped series' default label is its group: the set's id (without a label CDK would use the query).
      label: `${SERIES_LABEL}${labelSuffix}`,
      period: PERIOD,
    });
  const highest = (title: string, name: MetricName, statistic = 'Sum', extraDimensions: string[] = []) =>
    new GraphWidget({
      title: `${title}: the ${WORST_SETS} highest sets`,
      left: [worst(name, statistic, 'DESC', WORST_SETS, extraDimensions)],
      width: WIDTH,
      height: HEIGHT,
    });
  return [
    new TextWidget({
      markdown:
        `## Credential sets (${stage.credentialSets.length})\n` +
        `More than ${PER_SET_ALARMS_MAX_SETS} sets: each graph draws the ${WORST_SETS} sets with the worst values in the time range, each line named by its set. ` +
        "The sets behind an alarm are its contributors; one set's state: `token-broker status <set>`.",
      width: 24,
      height: 2,
    }),
    new GraphWidget({
      title: `Token validity left (s): the ${WORST_SETS} lowest sets`,
      left: [worst(BrokerMetric.TokenValiditySeconds, 'Minimum', 'ASC')],
      leftAnnotations: [{ value: stage.alarms.tokenValiditySeconds, label: 'alarm', color: '#ff7f0e' }],
      width: WIDTH,
      height: HEIGHT,
    }),
    highest('No usable token (1: none)', BrokerMetric.NoUsableToken, 'Maximum'),
    highest('Login failures, all causes', BrokerMetric.LoginFailure, 'Sum', [DIMENSION_ERROR_CODE]),
    highest('Credentials rejected', BrokerMetric.CredentialsRejected),
    highest('Vendor unavailable', BrokerMetric.VendorUnavailable),
    highest('Env mismatch', BrokerMetric.EnvMismatch),
    new GraphWidget({
      title: 'Vendor clock skew (s): the 5 highest and 5 lowest sets',
      left: [
        worst(BrokerMetric.VendorClockSkewSeconds, 'Maximum', 'DESC', 5, [], ' (highest)'),
        worst(BrokerMetric.VendorClockSkewSeconds, 'Minimum', 'ASC', 5, [], ' (lowest)'),
      ],
      width: WIDTH,
      height: HEIGHT,
    }),
    highest('Lease contention', BrokerMetric.LeaseContention),
    highest('Logins', BrokerMetric.LoginSuccess),
    highest('Tokens vended', BrokerMetric.TokensVended),
    highest('Permits granted', BrokerMetric.PermitsGranted),
    highest('Permits returned', BrokerMetric.PermitsReturned),
    highest('Permits denied', BrokerMetric.PermitsDenied),
    permitsPerConsumerAllSets(),
    highest('Vendor 429 reported', BrokerMetric.VendorRateLimitReported),
    highest('Token rejections reported', BrokerMetric.TokenRejectionsReported),
    highest('Class limits below configuration', BrokerMetric.ClassLimitBelowConfigured),
    highest('Class limits raised', BrokerMetric.ClassLimitRaised),
    // Metrics Insights has no percentiles: the slowest request of each set (vend's p99 is with the functions).
    highest('Vend latency (ms), slowest request', BrokerMetric.VendLatency, 'Maximum'),
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

function tableWidgets(tables: Record<string, ITable>, notes: Partial<Record<string, string>>): IWidget[] {
  return Object.entries(tables).map(
    ([name, table]) =>
      new GraphWidget({
        title: `${name} table${notes[name] ? ` (${notes[name]})` : ''}: capacity used and throttles`,
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
