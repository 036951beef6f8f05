import { readFileSync } from 'node:fs';
import { Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { LOGIN_WORST_CASE_SECONDS, VEND_REFRESH_WAIT_SECONDS } from '../infra/function-sizing.js';
import { functionConfigDocuments } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { brokerConfigText, configRevision } from '../shared/config/broker-config.js';
import { Metric } from '../shared/metric-names.js';
import { loadRefresherConfig } from '../shared/tokens/refresher-config.js';
import { loadVendConfig } from '../shared/vend/vend-config.js';
import { writeConfigDocument } from './support/config-document.js';
import { type Deployed, type Json, refOf, stageOf, synthesizeStages } from './support/infra-template.js';

let deployed: Record<string, Deployed> = {};

beforeAll(() => {
  ({ deployed } = synthesizeStages());
});

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes. */
function markdownAnchors(markdown: string): Set<string> {
  return new Set(
    [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) =>
      (heading ?? '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

/** What operations rely on: the schedule, alarms and their runbook links, functions, outputs, dashboard. */
describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);

  it('runs the refresher on the schedule, with the scheduled event, allowed by the rule only', () => {
    const { template, ids, stage } = d();
    const rules = template.findResources('AWS::Events::Rule');
    expect(Object.values(rules).map((r) => r.Properties.ScheduleExpression)).toEqual([
      `rate(${stage.refreshScheduleMinutes} minutes)`,
    ]);
    const rule = Object.values(rules)[0]?.Properties;
    expect(rule?.State).toBe('ENABLED');
    expect(rule?.Targets.map((t: Json) => refOf(t.Arn))).toEqual([ids.refresher]);
    expect(rule?.Targets[0].Input).toBeUndefined();
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [ids.refresher, 'Arn'] },
      SourceArn: { 'Fn::GetAtt': [Object.keys(rules)[0], 'Arn'] },
    });
  });

  it('gives every alarm a description naming an existing runbook section, and the topic as action', () => {
    const { template, stage } = d();
    const anchors = markdownAnchors(readFileSync(new URL('../docs/runbook.md', import.meta.url), 'utf8'));
    const topics = Object.keys(template.findResources('AWS::SNS::Topic'));
    expect(topics).toHaveLength(1);
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties);
    // 7 per credential set, 3 per function, the refresher heartbeat, 2 per table, vend's 3 5xx codes and p99,
    // the ledger's clock skew, the class limits below their configuration and raised (one each for all sets).
    expect(alarms).toHaveLength(7 * stage.credentialSets.length + 3 * 2 + 1 + 2 * 2 + 3 + 1 + 1 + 2);
    expect(stage.runbookUrl).toMatch(/^https:\/\/[^#\s]+$/);
    for (const alarm of alarms) {
      const [, url, link] = /Runbook: (https:\/\/\S+)#([a-z0-9-]+)$/.exec(alarm.AlarmDescription) ?? [];
      expect(link, alarm.AlarmName).toBeDefined();
      expect(url, alarm.AlarmName).toBe(stage.runbookUrl);
      expect(anchors.has(link ?? ''), `${alarm.AlarmName} → #${link}`).toBe(true);
      expect(alarm.AlarmDescription.length, alarm.AlarmName).toBeGreaterThan(60);
      expect(alarm.AlarmActions).toEqual([{ Ref: topics[0] }]);
      expect(alarm.OKActions).toEqual([{ Ref: topics[0] }]);
    }
  });

  it('alarms on every broker metric the issue lists, per credential set, with the dimensions the functions emit', () => {
    const { template, stage } = d();
    const perSet = [
      [Metric.NoUsableToken, 'GreaterThanOrEqualToThreshold', 1],
      [Metric.TokenValiditySeconds, 'LessThanThreshold', stage.alarms.tokenValiditySeconds],
      [Metric.CredentialsRejected, 'GreaterThanOrEqualToThreshold', 1],
      [Metric.VendorUnavailable, 'GreaterThanOrEqualToThreshold', 1],
      [Metric.EnvMismatch, 'GreaterThanOrEqualToThreshold', 1],
      [Metric.VendorRateLimitReported, 'GreaterThanOrEqualToThreshold', 1],
      [Metric.PermitsDenied, 'GreaterThanOrEqualToThreshold', stage.alarms.permitDenialsPerPeriod],
    ] as const;
    for (const set of stage.credentialSets) {
      for (const [metric, comparison, threshold] of perSet) {
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          Namespace: 'TokenBroker',
          MetricName: metric,
          Dimensions: Match.arrayEquals([
            { Name: 'CredentialSet', Value: set.id },
            { Name: 'service', Value: 'token-broker' },
          ]),
          ComparisonOperator: comparison,
          Threshold: threshold,
        });
      }
    }
  });

  it('alarms once over every set when a learned class limit is below its configuration, whatever the stage size', () => {
    const { template } = d();
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: Match.stringLikeRegexp('-classes-limit-below-configured$'),
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      AlarmDescription: Match.stringLikeRegexp('#class-limit-below-its-configuration$'),
      Metrics: [
        Match.objectLike({
          Expression: Match.stringLikeRegexp(
            `SELECT SUM\\(${Metric.ClassLimitBelowConfigured}\\) .* GROUP BY CredentialSet`,
          ),
          Period: 300,
        }),
      ],
    });
  });

  it('alarms once over every set when a rise raised a class limit, as on a limit below its configuration', () => {
    const { template } = d();
    const alarmsOn = (metric: string): Json[] =>
      Object.values(template.findResources('AWS::CloudWatch::Alarm'))
        .map((a) => a.Properties)
        .filter((a) => a.Metrics?.some((m: Json) => String(m.Expression).includes(`SUM(${metric})`)));
    const below = alarmsOn(Metric.ClassLimitBelowConfigured);
    const raised = alarmsOn(Metric.ClassLimitRaised);
    expect(below).toHaveLength(1);
    expect(raised).toHaveLength(1);
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: Match.stringLikeRegexp('-classes-limit-raised$'),
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 1,
      DatapointsToAlarm: 1,
      TreatMissingData: 'notBreaching',
      AlarmDescription: Match.stringLikeRegexp('rose: .*#class-limit-raised$'),
      Metrics: [
        Match.objectLike({
          Expression: `SELECT SUM(${Metric.ClassLimitRaised}) FROM SCHEMA("TokenBroker", CredentialSet, service) WHERE service = 'token-broker' GROUP BY CredentialSet ORDER BY SUM() DESC`,
          Period: 300,
        }),
      ],
    });
    // The same kind of alarm as the one below its configuration: statistic, period, threshold, actions.
    const kindOf = (alarm: Json) => ({
      ...alarm,
      AlarmName: undefined,
      AlarmDescription: undefined,
      Metrics: (alarm.Metrics as Json[]).map((m) => ({ ...m, Expression: undefined })),
    });
    expect(kindOf(raised[0] ?? {})).toEqual(kindOf(below[0] ?? {}));
  });

  it('alarms when the refresher has not run for two schedule periods, counting no data as not running', () => {
    const { template, stage } = d();
    // ScheduledRun, which only scheduled runs emit: vend's on-demand re-logins do not count.
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'TokenBroker',
      MetricName: Metric.ScheduledRun,
      Dimensions: [{ Name: 'service', Value: 'token-broker' }],
      Statistic: 'Sum',
      Period: stage.refreshScheduleMinutes * 60,
      ComparisonOperator: 'LessThanThreshold',
      Threshold: 1,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
      TreatMissingData: 'breaching',
    });
  });

  it('alarms on errors, throttles and near-timeout durations of both functions, and on both tables', () => {
    const { template, ids, json } = d();
    for (const fn of [ids.refresher, ids.vend]) {
      const timeoutMs = (json.Resources[fn]?.Properties.Timeout as number) * 1000;
      for (const [metric, threshold] of [
        ['Errors', 1],
        ['Throttles', 1],
        ['Duration', Math.round(timeoutMs * 0.8)],
      ] as const) {
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          MetricName: metric,
          Dimensions: [{ Name: 'FunctionName', Value: { Ref: fn } }],
          Threshold: threshold,
        });
      }
    }
    const tableIds = Object.keys(template.findResources('AWS::DynamoDB::Table'));
    for (const table of tableIds) {
      for (const metric of ['ReadThrottleEvents', 'WriteThrottleEvents', 'SystemErrors']) {
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          Metrics: Match.arrayWith([
            Match.objectLike({
              MetricStat: Match.objectLike({
                Metric: Match.objectLike({
                  MetricName: metric,
                  Dimensions: Match.arrayWith([{ Name: 'TableName', Value: { Ref: table } }]),
                }),
              }),
            }),
          ]),
        });
      }
    }
  });

  it('builds both functions on Node 24, arm64, with log retention and timeouts sized to their waits', () => {
    const { json, ids, stage, template } = d();
    const logGroups = template.findResources('AWS::Logs::LogGroup');
    for (const fn of [ids.refresher, ids.vend]) {
      const props = json.Resources[fn]?.Properties ?? {};
      expect(props.Runtime).toBe('nodejs24.x');
      expect(props.Architectures).toEqual(['arm64']);
      expect(props.Handler).toBe('index.handler');
      const logGroup = refOf((props.LoggingConfig as Json).LogGroup) ?? '';
      expect(logGroups[logGroup]?.Properties.RetentionInDays).toBe(stage.logRetentionDays);
      // No --enable-source-maps (it indexes the map at every cold start): the bundle maps a stack when it formats
      // one (test/infra-bundle.test.ts).
      expect((props.Environment as { Variables: Json }).Variables.NODE_OPTIONS).toBeUndefined();
    }
    // The refresher outlasts two rounds of worst-case logins (vendor retry budget plus a last attempt) and
    // ends before the next scheduled run; the vend function outlasts its wait for an on-demand re-login.
    const timeout = (id: string) => json.Resources[id]?.Properties.Timeout as number;
    expect(timeout(ids.refresher)).toBeGreaterThanOrEqual(2 * LOGIN_WORST_CASE_SECONDS);
    expect(timeout(ids.refresher)).toBeLessThan(stage.refreshScheduleMinutes * 60);
    expect(timeout(ids.vend)).toBeGreaterThan(VEND_REFRESH_WAIT_SECONDS);
  });

  it('hands each function the configuration document it parses at cold start, and the names of their resources', () => {
    const { json, ids, stage } = d();
    const env = (id: string) =>
      (json.Resources[id]?.Properties.Environment as { Variables: Json } | undefined)?.Variables ?? {};
    const refresher = env(ids.refresher);
    const vend = env(ids.vend);
    // The document in each code asset (test/infra-bundle.test.ts finds it there) is the one the template names.
    const documents = functionConfigDocuments(stage);
    expect(refresher.BROKER_CONFIG_REVISION).toBe(configRevision(brokerConfigText(documents.refresher)));
    expect(vend.BROKER_CONFIG_REVISION).toBe(configRevision(brokerConfigText(documents.vend)));
    for (const name of ['CREDENTIAL_SETS', 'CONSUMERS', 'OPERATORS']) {
      expect(refresher[name]).toBeUndefined();
      expect(vend[name]).toBeUndefined();
    }
    const load = <T>(document: unknown, variables: Json, loader: (e: Record<string, string>) => T): T => {
      const { file, remove } = writeConfigDocument(document);
      try {
        return loader({ ...(variables as Record<string, string>), BROKER_CONFIG_FILE: file });
      } finally {
        remove();
      }
    };
    const placeholders = { TOKENS_TABLE_NAME: 't', LEDGER_TABLE_NAME: 'l', REFRESHER_FUNCTION_NAME: 'r' };
    const refresherConfig = load(documents.refresher, { ...refresher, ...placeholders }, loadRefresherConfig);
    const vendConfig = load(documents.vend, { ...vend, ...placeholders }, loadVendConfig);
    // Exactly the validated sets, defaults and all, with the secret found by its name.
    const sets = refresherConfig.sets;
    expect(sets).toEqual(
      stage.credentialSets.map(({ secretName, ...set }) => ({ ...set, secretId: secretName })),
    );
    expect(vendConfig.sets).toEqual(sets);
    expect(vendConfig.consumers).toEqual(stage.consumers);
    expect(vendConfig.operators).toEqual(stage.operators);
    // The refresher's document has no consumers or operators: it has no use for them.
    expect(documents.refresher).not.toHaveProperty('consumers');
    expect(documents.refresher).not.toHaveProperty('operators');
    expect(refresher.LEDGER_TABLE_NAME).toBeUndefined();
    const tables = Object.keys(d().template.findResources('AWS::DynamoDB::Table'));
    expect(tables).toContain(refOf(refresher.TOKENS_TABLE_NAME));
    expect(refOf(vend.TOKENS_TABLE_NAME)).toBe(refOf(refresher.TOKENS_TABLE_NAME));
    expect(tables).toContain(refOf(vend.LEDGER_TABLE_NAME));
    expect(refOf(vend.LEDGER_TABLE_NAME)).not.toBe(refOf(vend.TOKENS_TABLE_NAME));
    expect(refOf(vend.REFRESHER_FUNCTION_NAME)).toBe(ids.refresher);
  });

  it('outputs the vend URL, the table names and the alarm topic', () => {
    const { json, template } = d();
    const urlId = Object.keys(template.findResources('AWS::Lambda::Url'))[0];
    expect(json.Outputs.VendUrl).toMatchObject({ Value: { 'Fn::GetAtt': [urlId, 'FunctionUrl'] } });
    const outputs = json.Outputs as Record<string, { Value: unknown }>;
    const tableIds = Object.keys(template.findResources('AWS::DynamoDB::Table'));
    expect([refOf(outputs.TokensTableName?.Value), refOf(outputs.LedgerTableName?.Value)].sort()).toEqual(
      tableIds.sort(),
    );
    expect(refOf(outputs.AlarmTopicArn?.Value)).toBe(
      Object.keys(template.findResources('AWS::SNS::Topic'))[0],
    );
  });

  it('draws a dashboard with a row for every credential set', () => {
    const dashboards = Object.values(d().template.findResources('AWS::CloudWatch::Dashboard'));
    expect(dashboards).toHaveLength(1);
    const body = JSON.stringify(dashboards[0]?.Properties.DashboardBody);
    for (const set of d().stage.credentialSets) {
      expect(body).toContain(`${set.id}: token validity left`);
      expect(body).toContain(`CredentialSet=\\\\\\"${set.id}\\\\\\"`);
    }
  });
});
