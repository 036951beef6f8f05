import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IMetric,
  MathExpression,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { type ITable, Operation } from 'aws-cdk-lib/aws-dynamodb';
import type { IAlias, IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { ConfigurationError } from '../../shared/errors.js';
import { MAX_LEDGER_CLOCK_SKEW_MS } from '../../shared/ledger/ledger-clock.js';
import {
  Metric as BrokerMetric,
  DIMENSION_ERROR_CODE,
  type MetricName,
  VEND_SERVER_ERROR_CODES,
} from '../../shared/metric-names.js';
import {
  PER_SET_ALARMS_MAX_SETS,
  perSetMonitoring,
  serviceMetric,
  setInsightsQuery,
  setMetric,
} from '../broker-metrics.js';
import { alarmDescription, type RunbookAnchor, RunbookSection } from '../runbook.js';
import type { StageConfig } from '../stage-config.js';
import { filledSum } from './filled-sum.js';

export interface BrokerAlarmsProps {
  stage: StageConfig;
  /** Prefix of every alarm name, e.g. the stack name. */
  namePrefix: string;
  topic: ITopic;
  refresher: { fn: IFunction; timeout: Duration };
  /** `alias`: the one the Function URL serves (consumers' traffic). */
  vend: { fn: IFunction; alias: IAlias; timeout: Duration };
  /**
   * By role (tokens, ledger): the table that holds that role's items, watched by its name in this stack's Region.
   * In a two-Region stage the tokens are the MRSC table's (infra/broker-stack.ts), not the stack's own table.
   */
  tables: Record<string, ITable>;
  /** What a table is, said after its role in the alarm's meaning, where it is not the stack's own table. */
  tableNotes?: Partial<Record<string, string>>;
}

interface AlarmSpec {
  metric: IMetric;
  threshold: number;
  comparison: ComparisonOperator;
  /** Consecutive periods that must breach (all of them). */
  periods?: number;
  missing?: TreatMissingData;
  evaluateLowSampleCountPercentile?: string;
  meaning: string;
  runbook: RunbookAnchor;
}

/** One alarm kind of a credential set: what it watches and says, for one set or for all of them. */
interface SetAlarmKind {
  /** The alarm name's end: `<set id>-<suffix>` per set, `all-sets-<suffix>` grouped. */
  suffix: string;
  metric: MetricName;
  statistic: 'Maximum' | 'Minimum' | 'Sum';
  period: Duration;
  threshold: number;
  comparison: ComparisonOperator;
  periods?: number;
  /** The stage setting `periods` comes from, for the message when a grouped alarm cannot span them. */
  periodsSetting?: string;
  perSet: (setId: string) => string;
  grouped: string;
  runbook: RunbookAnchor;
}

/** Metrics Insights alarms evaluate only the latest 3 hours of data (CloudWatch's alarm limits). */
const INSIGHTS_ALARM_WINDOW_MINUTES = 180;

/** How on-call finds the sets behind a grouped alarm; part of its description. */
const WHICH_SET =
  'One alarm for all sets, each set a contributor that notifies on its own: the sets in ALARM are its contributors (the alarm in the CloudWatch console, or aws cloudwatch describe-alarm-contributors --alarm-name <this alarm>); also the dashboard and token-broker status.';

const FIVE_MINUTES = Duration.minutes(5);
const AT_LEAST = ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD;
const BELOW = ComparisonOperator.LESS_THAN_THRESHOLD;

/**
 * Every alarm the on-call person can be paged by. Each one says what it means and which runbook section to
 * open, and notifies the alarm topic both when it fires and when it clears.
 */
export class BrokerAlarms extends Construct {
  readonly alarms: Alarm[] = [];
  /**
   * The alarms that roll a vend deployment back (VendRollout): vend's errors, its 5xx answers by code and its
   * p99 latency. They watch all of vend's traffic, not the new version's alone, and that is enough: their
   * thresholds are absolute counts (one unhandled error, one 5xx of a code per 5 minutes by default) or the
   * slowest 1 %, and a canary takes 10 % of the traffic, so a bad canary trips them by itself. The custom metrics
   * carry no version to tell the versions apart (a version dimension would mean new series and alarms at every
   * deploy). The price: a failure of the old version during the shift also rolls the deployment back, which
   * is the safe way round.
   */
  readonly rollbackAlarms: Alarm[] = [];

  constructor(
    scope: Construct,
    id: string,
    private readonly props: BrokerAlarmsProps,
  ) {
    super(scope, id);
    const kinds = this.setAlarmKinds();
    if (perSetMonitoring(props.stage.credentialSets.length)) {
      for (const set of props.stage.credentialSets) for (const kind of kinds) this.perSetAlarm(set.id, kind);
    } else {
      for (const kind of kinds) this.groupedSetAlarm(kind);
    }
    // Rare, and never urgent: one alarm over every set whatever the stage's size (no 20 more resources). A
    // limit that rose is the same kind of news the other way (the configuration, or nothing, to update).
    this.groupedSetAlarm(this.classLimitKind(), 'classes-limit-below-configured');
    this.groupedSetAlarm(this.classLimitRaisedKind(), 'classes-limit-raised');
    this.functionAlarms('refresher', props.refresher.fn, props.refresher.timeout);
    const vendErrors = this.functionAlarms('vend', props.vend.fn, props.vend.timeout);
    this.rollbackAlarms.push(vendErrors, ...this.vendServerErrors(), this.vendLatency());
    this.refresherNotRunning();
    this.ledgerClockSkew();
    for (const [name, table] of Object.entries(props.tables)) this.tableAlarms(name, table);
  }

  /** A learned class limit below the configured one (docs/class-limits.md): the configuration allows too much. */
  private classLimitKind(): SetAlarmKind {
    return {
      suffix: 'class-limit-below-configured',
      metric: BrokerMetric.ClassLimitBelowConfigured,
      statistic: 'Sum',
      period: FIVE_MINUTES,
      threshold: 1,
      comparison: AT_LEAST,
      perSet: (setId) =>
        `The vendor's answers to a class of credential set ${setId} (reports, rebalancing) show a lower limit than its configuration: consumers will meet 429s the configuration does not foresee.`,
      grouped:
        "The vendor's answers to a class of a credential set (reports, rebalancing) show a lower limit than its configuration: consumers will meet 429s the configuration does not foresee.",
      runbook: RunbookSection.ClassLimitBelowConfigured,
    };
  }

  /**
   * A class limit a rise adopted (docs/class-limits.md, R3): the vendor allows more than the broker held, checked
   * with a bounded probe. Nothing is refused; what is configured may now allow less than the vendor does.
   */
  private classLimitRaisedKind(): SetAlarmKind {
    return {
      suffix: 'class-limit-raised',
      metric: BrokerMetric.ClassLimitRaised,
      statistic: 'Sum',
      period: FIVE_MINUTES,
      threshold: 1,
      comparison: AT_LEAST,
      perSet: (setId) =>
        `A class limit of credential set ${setId} (reports, rebalancing) rose: the vendor served a bounded probe above the limit the broker held without a 429, and the broker now keeps the larger limit.`,
      grouped:
        'A class limit of a credential set (reports, rebalancing) rose: the vendor served a bounded probe above the limit the broker held without a 429, and the broker now keeps the larger limit.',
      runbook: RunbookSection.ClassLimitRaised,
    };
  }

  /**
   * The seven alarms of a credential set. A small stage gets them per set, each naming its set; a large one gets
   * one of each kind over all sets (groupedSetAlarm).
   */
  private setAlarmKinds(): SetAlarmKind[] {
    const { alarms, refreshScheduleMinutes } = this.props.stage;
    const run = Duration.minutes(refreshScheduleMinutes);
    return [
      {
        suffix: 'no-usable-token',
        metric: BrokerMetric.NoUsableToken,
        statistic: 'Maximum',
        period: run,
        threshold: 1,
        comparison: AT_LEAST,
        perSet: (setId) =>
          `Credential set ${setId} has no usable token: consumers get 503 TOKEN_UNAVAILABLE.`,
        grouped: 'A credential set has no usable token: its consumers get 503 TOKEN_UNAVAILABLE.',
        runbook: RunbookSection.NoUsableToken,
      },
      {
        suffix: 'token-validity-low',
        metric: BrokerMetric.TokenValiditySeconds,
        statistic: 'Minimum',
        period: run,
        threshold: alarms.tokenValiditySeconds,
        comparison: BELOW,
        perSet: (setId) =>
          `Credential set ${setId}'s token has less than ${alarms.tokenValiditySeconds} s of validity left: re-logins have been failing since the soft threshold.`,
        grouped: `A credential set's token has less than ${alarms.tokenValiditySeconds} s of validity left: re-logins have been failing since the soft threshold.`,
        runbook: RunbookSection.TokenValidityLow,
      },
      {
        suffix: 'credentials-rejected',
        metric: BrokerMetric.CredentialsRejected,
        statistic: 'Sum',
        period: run,
        threshold: 1,
        comparison: AT_LEAST,
        perSet: (setId) =>
          `The vendor rejected credential set ${setId}'s username or password (INVALID_CREDENTIALS); the broker waits out a cooldown per secret version.`,
        grouped:
          "The vendor rejected a credential set's username or password (INVALID_CREDENTIALS); the broker waits out a cooldown per secret version.",
        runbook: RunbookSection.CredentialsRejected,
      },
      {
        suffix: 'vendor-unavailable',
        metric: BrokerMetric.VendorUnavailable,
        statistic: 'Sum',
        period: run,
        threshold: 1,
        comparison: AT_LEAST,
        periods: alarms.vendorUnavailablePeriods,
        periodsSetting: 'alarms.vendorUnavailablePeriods',
        perSet: (setId) =>
          `Logins for credential set ${setId} have failed on vendor unavailability (5xx, 429, timeout, network) for ${alarms.vendorUnavailablePeriods} scheduled runs in a row; the current token stays in use until its floor.`,
        grouped: `Logins for a credential set have failed on vendor unavailability (5xx, 429, timeout, network) for ${alarms.vendorUnavailablePeriods} scheduled runs in a row; the current token stays in use until its floor.`,
        runbook: RunbookSection.VendorUnavailable,
      },
      {
        suffix: 'env-mismatch',
        metric: BrokerMetric.EnvMismatch,
        statistic: 'Sum',
        period: run,
        threshold: 1,
        comparison: AT_LEAST,
        perSet: (setId) =>
          `A login for credential set ${setId} returned a token of the other vendor environment; it was discarded.`,
        grouped:
          'A login for a credential set returned a token of the other vendor environment; it was discarded.',
        runbook: RunbookSection.EnvMismatch,
      },
      {
        suffix: 'vendor-429-reported',
        metric: BrokerMetric.VendorRateLimitReported,
        statistic: 'Sum',
        period: FIVE_MINUTES,
        threshold: 1,
        comparison: AT_LEAST,
        perSet: (setId) =>
          `Consumers of credential set ${setId} report vendor 429 answers: the rate ledger did not keep them inside the quota.`,
        grouped:
          'Consumers of a credential set report vendor 429 answers: the rate ledger did not keep them inside the quota.',
        runbook: RunbookSection.VendorRateLimited,
      },
      {
        suffix: 'permit-denials-sustained',
        metric: BrokerMetric.PermitsDenied,
        statistic: 'Sum',
        period: FIVE_MINUTES,
        threshold: alarms.permitDenialsPerPeriod,
        comparison: AT_LEAST,
        periods: alarms.permitDenialsPeriods,
        periodsSetting: 'alarms.permitDenialsPeriods',
        perSet: (setId) =>
          `Credential set ${setId} has denied at least ${alarms.permitDenialsPerPeriod} permits per 5 minutes for ${alarms.permitDenialsPeriods * 5} minutes: consumers want more than the vendor's quota.`,
        grouped: `A credential set has denied at least ${alarms.permitDenialsPerPeriod} permits per 5 minutes for ${alarms.permitDenialsPeriods * 5} minutes: consumers want more than the vendor's quota.`,
        runbook: RunbookSection.PermitDenials,
      },
    ];
  }

  private perSetAlarm(setId: string, kind: SetAlarmKind): void {
    this.add(`${setId}-${kind.suffix}`, {
      metric: setMetric(kind.metric, setId, kind.statistic, kind.period),
      threshold: kind.threshold,
      comparison: kind.comparison,
      periods: kind.periods,
      meaning: kind.perSet(setId),
      runbook: kind.runbook,
    });
  }

  /**
   * One alarm of a kind for every set of the stage: a Metrics Insights query with one series per set, each a
   * contributor that goes to ALARM (and notifies) on its own, with the statistic, threshold, periods and
   * missing-data treatment of the per-set alarm. The series come in the order of breaching first, so that past
   * Metrics Insights' 500 series (PARTIAL_DATA) the ones that breach are still among those evaluated.
   */
  private groupedSetAlarm(kind: SetAlarmKind, name = `all-sets-${kind.suffix}`): void {
    const periods = kind.periods ?? 1;
    const windowMinutes = periods * kind.period.toMinutes();
    if (windowMinutes > INSIGHTS_ALARM_WINDOW_MINUTES) {
      const { stage } = this.props;
      throw new ConfigurationError(
        `invalid stage "${stage.name}": with more than ${PER_SET_ALARMS_MAX_SETS} credential sets the ${kind.suffix} alarm is a Metrics Insights alarm, which evaluates only the latest ${INSIGHTS_ALARM_WINDOW_MINUTES} minutes; ` +
          `${kind.periodsSetting ?? 'its periods'} (${periods}) × ${kind.period.toMinutes()} min is ${windowMinutes} min: lower ${kind.periodsSetting ?? 'its periods'}${kind.period.toMinutes() === stage.refreshScheduleMinutes ? ' or refreshScheduleMinutes' : ''}`,
      );
    }
    this.add(name, {
      metric: new MathExpression({
        expression: setInsightsQuery(kind.metric, {
          statistic: kind.statistic,
          order: kind.comparison === BELOW ? 'ASC' : 'DESC',
        }),
        period: kind.period,
      }),
      threshold: kind.threshold,
      comparison: kind.comparison,
      periods: kind.periods,
      meaning: `${kind.grouped} ${WHICH_SET}`,
      runbook: kind.runbook,
    });
  }

  /** Errors, throttles and near-timeout durations of one function; answers the errors alarm. */
  private functionAlarms(name: string, fn: IFunction, timeout: Duration): Alarm {
    const limitMs = this.nearTimeoutMs(timeout);
    const share = this.props.stage.alarms.durationShareOfTimeout;
    const errors = this.add(`${name}-errors`, {
      metric: fn.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' }),
      threshold: 1,
      comparison: AT_LEAST,
      meaning: `The ${name} function failed (an unhandled error or a timeout).`,
      runbook: RunbookSection.FunctionErrors,
    });
    this.add(`${name}-throttles`, {
      metric: fn.metricThrottles({ period: FIVE_MINUTES, statistic: 'Sum' }),
      threshold: 1,
      comparison: AT_LEAST,
      meaning: `Lambda throttled invocations of the ${name} function: the account or function concurrency is exhausted.`,
      runbook: RunbookSection.FunctionThrottles,
    });
    this.add(`${name}-duration-near-timeout`, {
      metric: fn.metricDuration({ period: FIVE_MINUTES, statistic: 'Maximum' }),
      threshold: limitMs,
      comparison: AT_LEAST,
      meaning: `An invocation of the ${name} function took at least ${Math.round(share * 100)} % of its ${timeout.toSeconds()} s timeout.`,
      runbook: RunbookSection.FunctionDuration,
    });
    return errors;
  }

  private nearTimeoutMs(timeout: Duration): number {
    return Math.round(timeout.toMilliseconds() * this.props.stage.alarms.durationShareOfTimeout);
  }

  /** One alarm per error code of vend's 5xx answers (a fixed, short list: VEND_SERVER_ERROR_CODES). */
  private vendServerErrors(): Alarm[] {
    const threshold = this.props.stage.alarms.vendServerErrorsPerPeriod;
    return VEND_SERVER_ERROR_CODES.map((code) =>
      this.add(`vend-5xx-${code.toLowerCase().replaceAll('_', '-')}`, {
        metric: serviceMetric(
          BrokerMetric.VendServerError,
          { [DIMENSION_ERROR_CODE]: code },
          'Sum',
          FIVE_MINUTES,
        ),
        threshold,
        comparison: AT_LEAST,
        meaning: `The vend function answered consumers ${threshold === 1 ? 'with' : `at least ${threshold} times with`} 5xx ${code} in 5 minutes.`,
        runbook: RunbookSection.VendServerErrors,
      }),
    );
  }

  /**
   * Vend's p99 duration as Lambda measures it, on the alias the Function URL serves. Lambda's Duration rather
   * than the handler's VendLatency: it covers every request in one series (all routes, all sets, answers that
   * failed) and CloudWatch computes the percentile over all of them, whereas VendLatency is split by credential
   * set and percentiles of separate series cannot be combined. Neither includes a cold start's init.
   */
  private vendLatency(): Alarm {
    const { alarms } = this.props.stage;
    const nearTimeoutMs = this.nearTimeoutMs(this.props.vend.timeout);
    if (alarms.vendLatencyP99Ms >= nearTimeoutMs) {
      throw new ConfigurationError(
        `invalid stage "${this.props.stage.name}": alarms.vendLatencyP99Ms (${alarms.vendLatencyP99Ms}) must be below the vend near-timeout alarm's ${nearTimeoutMs} ms`,
      );
    }
    return this.add('vend-latency-p99', {
      metric: this.props.vend.alias.metricDuration({ period: FIVE_MINUTES, statistic: 'p99' }),
      threshold: alarms.vendLatencyP99Ms,
      comparison: AT_LEAST,
      meaning: `The slowest 1 % of vend requests took at least ${alarms.vendLatencyP99Ms} ms in 5 minutes (with few requests: the slowest one).`,
      runbook: RunbookSection.VendLatency,
      // With under 1000 requests in a period CloudWatch would otherwise be allowed to skip the percentile.
      evaluateLowSampleCountPercentile: 'evaluate',
    });
  }

  /** On ScheduledRun, which only scheduled runs emit: vend's on-demand re-logins cannot hide a dead schedule. */
  private refresherNotRunning(): void {
    const minutes = this.props.stage.refreshScheduleMinutes;
    this.add('refresher-not-running', {
      metric: serviceMetric(BrokerMetric.ScheduledRun, {}, 'Sum', Duration.minutes(minutes)),
      threshold: 1,
      comparison: BELOW,
      periods: 2,
      // No data at all is exactly what this alarm is about.
      missing: TreatMissingData.BREACHING,
      meaning: `The refresher has not started a scheduled run for two schedule periods (${2 * minutes} min): tokens are not being renewed.`,
      runbook: RunbookSection.RefresherNotRunning,
    });
  }

  /**
   * A vend process whose clock is more than MAX_LEDGER_CLOCK_SKEW_MS from DynamoDB's grants nothing: the ledger
   * counts each decision it refuses (ledger-clock.ts). Not a rollback alarm: a host's clock is not a release's.
   */
  private ledgerClockSkew(): void {
    this.add('ledger-clock-skew', {
      metric: serviceMetric(BrokerMetric.LedgerClockSkewRefused, {}, 'Sum', FIVE_MINUTES),
      threshold: 1,
      comparison: AT_LEAST,
      meaning: `A vend process's clock is more than ${MAX_LEDGER_CLOCK_SKEW_MS / 60_000} minutes from DynamoDB's: it refuses every permit (503 LEDGER_UNAVAILABLE) until its clock is fixed.`,
      runbook: RunbookSection.LedgerClockSkew,
    });
  }

  /**
   * Throttles and system errors of one table. In a two-Region stage the tokens' table is the MRSC table, which
   * also holds the leases: these two alarms are its only ones (the renewer has none of its own on it), over
   * every operation anyone sends it (GetItem, PutItem, UpdateItem among them).
   */
  private tableAlarms(name: string, table: ITable): void {
    const note = this.props.tableNotes?.[name];
    const which = `the ${name} table${note ? ` (${note})` : ''}`;
    const sumOf = (label: string, metrics: Record<string, IMetric>) =>
      filledSum(label, metrics, FIVE_MINUTES);
    const metric = (metricName: string, operation?: Operation) =>
      table.metric(metricName, {
        statistic: 'Sum',
        period: FIVE_MINUTES,
        // Passing dimensionsMap replaces the table's own TableName dimension, so name it again.
        ...(operation ? { dimensionsMap: { TableName: table.tableName, Operation: operation } } : {}),
      });
    this.add(`${name}-table-throttles`, {
      metric: sumOf(`${name} throttle events`, {
        reads: metric('ReadThrottleEvents'),
        writes: metric('WriteThrottleEvents'),
      }),
      threshold: 1,
      comparison: AT_LEAST,
      meaning: `DynamoDB throttled requests on ${which}.`,
      runbook: RunbookSection.DynamoDbErrors,
    });
    const operations = [
      Operation.GET_ITEM,
      Operation.PUT_ITEM,
      Operation.UPDATE_ITEM,
      Operation.DELETE_ITEM,
      Operation.QUERY,
    ];
    this.add(`${name}-table-system-errors`, {
      metric: sumOf(
        `${name} system errors`,
        Object.fromEntries(operations.map((op) => [op.toLowerCase(), metric('SystemErrors', op)])),
      ),
      threshold: 1,
      comparison: AT_LEAST,
      meaning: `DynamoDB answered requests on ${which} with internal server errors (HTTP 500).`,
      runbook: RunbookSection.DynamoDbErrors,
    });
  }

  private add(id: string, spec: AlarmSpec): Alarm {
    const periods = spec.periods ?? 1;
    const alarm = new Alarm(this, id, {
      alarmName: `${this.props.namePrefix}-${id}`,
      alarmDescription: alarmDescription(spec.meaning, this.props.stage.runbookUrl, spec.runbook),
      metric: spec.metric,
      threshold: spec.threshold,
      comparisonOperator: spec.comparison,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
      treatMissingData: spec.missing ?? TreatMissingData.NOT_BREACHING,
      evaluateLowSampleCountPercentile: spec.evaluateLowSampleCountPercentile,
    });
    const action = new SnsAction(this.props.topic);
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
    this.alarms.push(alarm);
    return alarm;
  }
}
