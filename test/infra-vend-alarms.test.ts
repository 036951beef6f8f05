import { Match } from 'aws-cdk-lib/assertions';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { VEND_TIMEOUT } from '../infra/function-sizing.js';
import { REPOSITORY_RUNBOOK_URL } from '../infra/runbook.js';
import { parseStageConfig } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { ConfigurationError } from '../shared/errors.js';
import { LedgerClockSkewError } from '../shared/ledger/errors.js';
import { ClockReference, LedgerClock } from '../shared/ledger/ledger-clock.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { DIMENSION_ERROR_CODE, Metric, VEND_SERVER_ERROR_CODES } from '../shared/metric-names.js';
import { MetricUnit } from '../shared/observability.js';
import { emittedDimensions } from './support/emitted-metrics.js';
import { type Deployed, SKIP_BUNDLING, stageOf, synthesizeStages } from './support/infra-template.js';
import { variant } from './support/stage-variants.js';

let deployed: Record<string, Deployed> = {};
const T_REFUSED = Date.UTC(2026, 0, 5, 9, 0, 0);

// Synthesizing both stages takes seconds, and longer on a loaded machine: a generous bound, not a measurement.
beforeAll(() => {
  ({ deployed } = synthesizeStages());
}, 180_000);
afterEach(() => {
  vi.restoreAllMocks();
});

function failureOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigurationError) return error.message;
    throw error;
  }
  throw new Error('the stage was accepted');
}

interface AlarmProps {
  AlarmName: string;
  Namespace?: string;
  MetricName?: string;
  Dimensions?: { Name: string; Value: unknown }[];
  Threshold: number;
}

/** Vend's 5xx answers by code and its p99 latency, alarmed on the metrics the functions really emit. */
describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);
  const alarms = () =>
    Object.values(d().template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => a.Properties as AlarmProps,
    );

  it('alarms on every 5xx error code of vend, with exactly the dimensions the vend function emits', () => {
    const { stage } = d();
    const onServerErrors = alarms().filter((a) => a.MetricName === Metric.VendServerError);
    expect(
      onServerErrors.map((a) => a.Dimensions?.find((x) => x.Name === DIMENSION_ERROR_CODE)?.Value).sort(),
    ).toEqual([...VEND_SERVER_ERROR_CODES].sort());
    const emitted = emittedDimensions((t) =>
      t.metric(Metric.VendServerError, MetricUnit.Count, 1, { [DIMENSION_ERROR_CODE]: 'TOKEN_UNAVAILABLE' }),
    );
    for (const alarm of onServerErrors) {
      expect(alarm).toMatchObject({
        Namespace: 'TokenBroker',
        Statistic: 'Sum',
        Period: 300,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: stage.alarms.vendServerErrorsPerPeriod,
        TreatMissingData: 'notBreaching',
      });
      expect(emitted).toEqual([(alarm.Dimensions ?? []).map((x) => x.Name).sort()]);
      expect(alarm.Dimensions).toContainEqual({ Name: 'service', Value: 'token-broker' });
    }
  });

  it("alarms on vend's p99 duration on the alias the URL serves, well under the near-timeout alarm", () => {
    const { template, ids, stage } = d();
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `TokenBroker-${name}-vend-latency-p99`,
      Namespace: 'AWS/Lambda',
      MetricName: 'Duration',
      ExtendedStatistic: 'p99',
      Period: 300,
      Dimensions: Match.arrayEquals([
        { Name: 'FunctionName', Value: { Ref: ids.vend } },
        { Name: 'Resource', Value: { 'Fn::Join': ['', [{ Ref: ids.vend }, ':live']] } },
      ]),
      Threshold: stage.alarms.vendLatencyP99Ms,
      EvaluateLowSampleCountPercentile: 'evaluate',
    });
    const nearTimeout = alarms().find(
      (a) => a.AlarmName === `TokenBroker-${name}-vend-duration-near-timeout`,
    );
    expect(nearTimeout?.Threshold).toBe(VEND_TIMEOUT.toMilliseconds() * stage.alarms.durationShareOfTimeout);
    expect(stage.alarms.vendLatencyP99Ms).toBeLessThanOrEqual((nearTimeout?.Threshold ?? 0) / 4);
  });

  it("alarms on the first permit decision refused for a process clock too far from DynamoDB's", () => {
    const alarm = alarms().find((a) => a.AlarmName === `TokenBroker-${name}-ledger-clock-skew`);
    expect(alarm).toMatchObject({
      Namespace: 'TokenBroker',
      MetricName: Metric.LedgerClockSkewRefused,
      Statistic: 'Sum',
      Period: 300,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      TreatMissingData: 'notBreaching',
    });
    expect((alarm as unknown as { AlarmDescription: string }).AlarmDescription).toMatch(
      /more than 10 minutes from DynamoDB's.*#ledger-clock-skew$/,
    );
    // The dimensions the ledger's clock writes when it refuses (service only): the alarm's series is that one.
    const emitted = emittedDimensions((telemetry) => {
      const reference = new ClockReference();
      reference.record(T_REFUSED, T_REFUSED, T_REFUSED + 11 * 60_000);
      const clock = new LedgerClock({ local: new ManualClock(T_REFUSED), reference, telemetry });
      expect(() => clock.now([planFor(rateLimitSettingsSchema.parse({}))])).toThrow(LedgerClockSkewError);
    });
    expect(emitted).toEqual([(alarm?.Dimensions ?? []).map((x) => x.Name).sort()]);
  });

  it('takes the refresher heartbeat from ScheduledRun with the dimensions the refresher emits', () => {
    const heartbeat = alarms().find((a) => a.AlarmName === `TokenBroker-${name}-refresher-not-running`);
    expect(heartbeat).toMatchObject({ Namespace: 'TokenBroker', MetricName: Metric.ScheduledRun });
    const emitted = emittedDimensions((t) => t.metric(Metric.ScheduledRun, MetricUnit.Count, 1));
    expect(emitted).toEqual([(heartbeat?.Dimensions ?? []).map((x) => x.Name).sort()]);
  });
});

describe('runbook URL and latency threshold of a stage', () => {
  it('requires an absolute https:// runbookUrl for a production stage, naming the field', () => {
    const withoutUrl = variant(prod, (s) => {
      delete s.runbookUrl;
    });
    expect(failureOf(() => parseStageConfig(withoutUrl))).toContain(
      'prod.runbookUrl: required for a production stage',
    );
    for (const [url, message] of [
      ['docs/runbook.md', 'an absolute https:// URL'],
      ['http://git.example.com/platform/token-broker/blob/main/docs/runbook.md', 'an absolute https:// URL'],
      ['https://git.example.com/docs/runbook.md#top', 'no #fragment'],
    ]) {
      for (const base of [prod, uat]) {
        const input = variant(base, (s) => Object.assign(s, { runbookUrl: url }));
        expect(
          failureOf(() => parseStageConfig(input)),
          url,
        ).toContain(`${base.name}.runbookUrl: ${message}`);
      }
    }
  });

  it("defaults a non-production stage's runbookUrl to the repository's runbook, an absolute URL", () => {
    const withoutUrl = variant(uat, (s) => {
      delete s.runbookUrl;
    });
    expect(parseStageConfig(withoutUrl).runbookUrl).toBe(REPOSITORY_RUNBOOK_URL);
    expect(new URL(REPOSITORY_RUNBOOK_URL).protocol).toBe('https:');
  });

  it('refuses a latency threshold at or above the near-timeout alarm when the stack is built', () => {
    const slow = variant(uat, (s) => Object.assign(s, { alarms: { ...s.alarms, vendLatencyP99Ms: 24_000 } }));
    expect(failureOf(() => createBrokerApp({ stages: [slow], context: SKIP_BUNDLING }))).toContain(
      'alarms.vendLatencyP99Ms (24000) must be below',
    );
  }, 120_000);
});
