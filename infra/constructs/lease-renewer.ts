import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, type IMetric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { QueryDefinition, QueryString, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { KEY_PREFIX } from '../../shared/aws/keys.js';
import type { BrokerConfigDocument } from '../../shared/config/broker-config.js';
import { LEARNED_TABLE_ENV } from '../../shared/ledger/learned-store.js';
import { MAX_LEDGER_CLOCK_SKEW_MS } from '../../shared/ledger/ledger-clock.js';
import { Metric, type MetricName } from '../../shared/metric-names.js';
import { RENEWER_CLOCK_TOLERANCE_MS } from '../../shared/regions/renewer-clock.js';
import { serviceMetric } from '../broker-metrics.js';
import { RENEWER_MEMORY_MB, RENEWER_RESERVED_CONCURRENCY, RENEWER_TIMEOUT } from '../function-sizing.js';
import { dynamoDbKeyAccess } from '../least-privilege.js';
import { alarmDescription, type RunbookAnchor, RunbookSection } from '../runbook.js';
import { BrokerFunction } from './broker-function.js';
import { RENEWER_LOG_QUERIES } from './log-queries.js';

/** The renewer's environment: both tables and which Region is whose in the lease item. */
export const RENEWER_ENV = {
  ledgerTable: 'LEDGER_TABLE_NAME',
  tokensTable: 'TOKENS_TABLE_NAME',
  leaseTable: 'LEASE_TABLE_NAME',
  learnedTable: LEARNED_TABLE_ENV,
  ownRegion: 'OWN_REGION',
  otherRegion: 'OTHER_REGION',
} as const;

export interface LeaseRenewerProps {
  entry: string;
  stageName: string;
  /** The credential sets and their limits (the refresher's document: sets only, no consumers). */
  config: BrokerConfigDocument;
  logRetention: RetentionDays;
  retainLogs: boolean;
  /** This Region's ledger table: the renewer reads its snapshot and writes the share it adopts. */
  ledger: ITable;
  /** The MRSC table, as it is in this Region. */
  globalTable: ITable;
  ownRegion: string;
  otherRegion: string;
  topic: ITopic;
  namePrefix: string;
  runbookUrl: string;
}

/**
 * A two-Region stage's lease renewer in one Region (docs/deploying.md, Two Regions): every minute EventBridge
 * starts a run that renews this Region's lease records every RENEW_MS and adopts its shares in the regional
 * ledger. Least privilege to the action: the ledger item's read and its share write (GetItem, UpdateItem), and
 * on the MRSC table only items whose key starts with `lease#` (GetItem, PutItem, UpdateItem), and the token items'
 * and the learned items' read (GetItem on `set#`, `learned#`); the tables' key only through DynamoDB. Alarms when it
 * fails or is throttled, and when its renewals fail or are refused (it counts them: a run whose renewals all fail
 * still ends normally). The MRSC table's throttles and errors in this Region are the serving stack's tokens-table
 * alarms (infra/constructs/broker-alarms.ts).
 */
export class LeaseRenewer extends Construct {
  readonly fn: BrokerFunction;
  readonly rule: Rule;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: LeaseRenewerProps) {
    super(scope, id);
    this.fn = new BrokerFunction(this, 'Function', {
      entry: props.entry,
      description: `token-broker ${props.stageName}: renews this Region's vendor-budget leases (${props.ownRegion})`,
      timeout: RENEWER_TIMEOUT,
      memorySize: RENEWER_MEMORY_MB,
      environment: {
        [RENEWER_ENV.leaseTable]: props.globalTable.tableName,
        [RENEWER_ENV.ownRegion]: props.ownRegion,
        [RENEWER_ENV.otherRegion]: props.otherRegion,
      },
      config: props.config,
      logRetention: props.logRetention,
      retainLogs: props.retainLogs,
      // A failed run is not retried: the next minute's run renews, well inside the 30 s lease's renewals.
      retryAttempts: 0,
      maxEventAge: Duration.minutes(1),
      reservedConcurrentExecutions: RENEWER_RESERVED_CONCURRENCY,
    });
    this.fn.bindTable(props.ledger, RENEWER_ENV.ledgerTable, ['GetItem', 'UpdateItem']);
    // Which tokens' ledger keys to lease: the token items (`set#…`) in the same table, read only.
    this.fn.bindTable(props.globalTable, RENEWER_ENV.tokensTable, ['GetItem'], [`${KEY_PREFIX.set}*`]);
    // Which rings to lease: the sets' learned limits, which both Regions' vend functions keep there. Read only:
    // learning is the vend functions' (a report), planning a renewal only reads what was learned.
    this.fn.bindTable(props.globalTable, RENEWER_ENV.learnedTable, ['GetItem'], [`${KEY_PREFIX.learned}*`]);
    this.fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [props.globalTable.tableArn],
        // Only the lease items are written: the token items beside them (`set#…`) are read, never written.
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${KEY_PREFIX.lease}*`] } },
      }),
    );
    if (props.globalTable.encryptionKey) dynamoDbKeyAccess(this.fn, props.globalTable.encryptionKey);

    this.rule = new Rule(this, 'Schedule', {
      description: `token-broker: lease renewer run every minute (${props.ownRegion})`,
      schedule: Schedule.rate(Duration.minutes(1)),
      targets: [new LambdaFunction(this.fn, { retryAttempts: 2, maxEventAge: Duration.minutes(1) })],
    });

    const fnMetric = (name: string) =>
      this.fn.metric(name, { statistic: 'Sum', period: Duration.minutes(1) });
    // Three minutes in a row: a lease lapses 30 s after its last renewal, so by then the Region is fenced.
    this.add('lease-renewer-errors', props, {
      metric: fnMetric('Errors'),
      periods: 3,
      meaning: `The lease renewer (${props.ownRegion}) failed three minutes in a row: this Region's leases lapse and it grants nothing beyond its floor.`,
      runbook: RunbookSection.FunctionErrors,
    });
    this.add('lease-renewer-throttles', props, {
      metric: fnMetric('Throttles'),
      periods: 3,
      meaning: `Lambda throttled the lease renewer (${props.ownRegion}) three minutes in a row.`,
      runbook: RunbookSection.FunctionThrottles,
    });
    // What the renewer counts itself (issue 33): a run whose renewals fail or are refused ends normally, so the
    // function's Errors do not see them. Three minutes in a row, as above: by then the Region is fenced.
    const renewerMetric = (name: MetricName) => serviceMetric(name, {}, 'Sum', Duration.minutes(1));
    this.add('lease-renewals-refused', props, {
      metric: renewerMetric(Metric.LeaseRenewalRefused),
      periods: 3,
      meaning: `The lease renewer (${props.ownRegion}) refused to renew three minutes in a row: its container's clock is not known to be within ${RENEWER_CLOCK_TOLERANCE_MS} ms of DynamoDB's, or is more than ${MAX_LEDGER_CLOCK_SKEW_MS / 60_000} minutes off it. This Region's leases lapse and it grants nothing beyond its floor.`,
      runbook: RunbookSection.LeaseRenewalsRefused,
    });
    this.add('lease-renewals-failing', props, {
      metric: renewerMetric(Metric.LeaseRenewalFailed),
      periods: 3,
      meaning: `Lease renewals of the lease renewer (${props.ownRegion}) failed in each of three minutes in a row (the lease store, the ledger, or a newer renewal adopting first): this Region's leases may lapse, and then it grants nothing beyond its floor.`,
      runbook: RunbookSection.LeaseRenewalsFailing,
    });
    this.saveQueries(props);
  }

  /** The renewer's saved queries (log-queries.ts), over its own log group: the runbook's sections name them. */
  private saveQueries(props: LeaseRenewerProps): void {
    const logGroup = this.fn.logGroup;
    for (const spec of RENEWER_LOG_QUERIES)
      new QueryDefinition(this, `Query-${spec.name}`, {
        queryDefinitionName: `${props.namePrefix}/${spec.name}`,
        queryString: new QueryString(spec.query),
        logGroups: [logGroup],
      });
  }

  private add(
    id: string,
    props: LeaseRenewerProps,
    spec: { metric: IMetric; periods?: number; meaning: string; runbook: RunbookAnchor },
  ): void {
    const periods = spec.periods ?? 1;
    const alarm = new Alarm(this, id, {
      alarmName: `${props.namePrefix}-${id}`,
      alarmDescription: alarmDescription(spec.meaning, props.runbookUrl, spec.runbook),
      metric: spec.metric,
      threshold: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    const action = new SnsAction(props.topic);
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
    this.alarms.push(alarm);
  }
}
