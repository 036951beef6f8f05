import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PER_SET_ALARMS_MAX_SETS } from '../infra/broker-metrics.js';
import type { StageInput } from '../infra/stage-config.js';
import { generateStage } from '../infra/tools/generate-stage.js';
import { ConfigurationError } from '../shared/errors.js';
import { Metric } from '../shared/metric-names.js';
import type { Json } from './support/infra-template.js';
import { type AlarmProperties, type Monitoring, synthesizeMonitoring } from './support/monitoring-stack.js';

/**
 * Alarms and dashboard of a company-sized stage (infra/tools/generate-stage.ts), built apart from BrokerStack:
 * what CloudWatch and CloudFormation would be given, against their limits.
 */

/**
 * The alarms that are not per set: 3 per function, the refresher heartbeat, 2 per table, vend's 3 5xx codes and
 * p99, the ledger's clock skew.
 */
/** ... and the class limits below their configuration and raised, one alarm each over every set at any size. */
const OTHER_ALARMS = 3 * 2 + 1 + 2 * 2 + 3 + 1 + 1 + 2;
const KINDS_PER_SET = 7;
/** CloudFormation: resources per stack. CloudWatch: widgets per dashboard, alarms per alarm status widget. */
const STACK_RESOURCES_MAX = 500;
const DASHBOARD_WIDGETS_MAX = 500;
const ALARM_STATUS_WIDGET_ALARMS_MAX = 100;
/** Metrics Insights alarms evaluate only the latest 3 hours. */
const INSIGHTS_WINDOW_SECONDS = 3 * 3600;

const stageOfSize = (sets: number, extra: Partial<StageInput> = {}): StageInput => ({
  ...generateStage({ consumers: Math.max(3, sets * 5), sets }),
  ...extra,
});

/** Settings other than the defaults, so that a value wired from the wrong setting shows. */
const TUNED: Partial<StageInput> = {
  refreshScheduleMinutes: 10,
  alarms: {
    emails: ['token-broker-alerts@example.com'],
    vendorUnavailablePeriods: 4,
    permitDenialsPerPeriod: 40,
    permitDenialsPeriods: 2,
    tokenValiditySeconds: 1500,
  },
};

/** GitHub's heading anchors, as test/infra-operations.test.ts derives them. */
const runbookAnchors = new Set(
  [...readFileSync(new URL('../docs/runbook.md', import.meta.url), 'utf8').matchAll(/^#{1,6} (.+)$/gm)].map(
    ([, heading]) =>
      (heading ?? '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-'),
  ),
);
const anchorOf = (alarm: AlarmProperties) =>
  /Runbook: https:\/\/\S+#([a-z0-9-]+)$/.exec(alarm.AlarmDescription)?.[1];

/** A Metrics Insights query over all sets, taken apart. */
const INSIGHTS_QUERY =
  /^SELECT (MAX|MIN|SUM)\((\w+)\) FROM SCHEMA\("TokenBroker", ([\w, ]+)\) WHERE service = 'token-broker' GROUP BY CredentialSet ORDER BY (MAX|MIN|SUM)\(\) (ASC|DESC)(?: LIMIT (\d+))?$/;
const parseQuery = (expression: string) => {
  const [, fn, metric, schema, orderFn, order, limit] = INSIGHTS_QUERY.exec(expression) ?? [];
  return fn
    ? {
        fn,
        metric,
        dimensions: (schema ?? '').split(', ').sort(),
        orderFn,
        order,
        limit: limit && Number(limit),
      }
    : undefined;
};
const STATISTIC_FUNCTIONS: Record<string, string> = { Maximum: 'MAX', Minimum: 'MIN', Sum: 'SUM' };

let small: Monitoring;
let large: Monitoring;
let tunedSmall: Monitoring;
let tunedLarge: Monitoring;

beforeAll(() => {
  small = synthesizeMonitoring(stageOfSize(2));
  large = synthesizeMonitoring(stageOfSize(100));
  tunedSmall = synthesizeMonitoring(stageOfSize(2, TUNED));
  tunedLarge = synthesizeMonitoring(stageOfSize(100, TUNED));
});

/** The per-set alarms of a small stage by kind (the name's end), for its first set. */
function perSetByKind(m: Monitoring): Map<string, AlarmProperties> {
  const firstSet = m.stage.credentialSets[0]?.id ?? '';
  const prefix = `TokenBroker-${m.stage.name}-${firstSet}-`;
  return new Map(
    m.alarms.filter((a) => a.AlarmName.startsWith(prefix)).map((a) => [a.AlarmName.slice(prefix.length), a]),
  );
}
const groupedOf = (m: Monitoring) =>
  m.alarms.filter((a) => a.AlarmName.startsWith(`TokenBroker-${m.stage.name}-all-sets-`));

describe('alarms of a stage of 100 credential sets', () => {
  it('are a fixed, small number: one per kind over all sets, plus the others', () => {
    expect(large.alarms).toHaveLength(KINDS_PER_SET + OTHER_ALARMS);
    expect(groupedOf(large)).toHaveLength(KINDS_PER_SET);
    const names = large.alarms.map((a) => a.AlarmName);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) {
      expect(name).toMatch(/^TokenBroker-scale-[a-z0-9-]+$/);
      expect(name.length).toBeLessThanOrEqual(255);
    }
    // No alarm of its own for any set.
    for (const set of large.stage.credentialSets) expect(names.join(' ')).not.toContain(set.id);
  });

  it.each([
    ['default settings', () => [small, large] as const],
    ['tuned settings', () => [tunedSmall, tunedLarge] as const],
  ])('watch what the per-set alarms watch, over every set (%s)', (_, stages) => {
    const [few, many] = stages();
    const perSet = perSetByKind(few);
    const grouped = groupedOf(many);
    expect(perSet.size).toBe(KINDS_PER_SET);
    expect(grouped.map((a) => a.AlarmName.replace('TokenBroker-scale-all-sets-', '')).sort()).toEqual(
      [...perSet.keys()].sort(),
    );
    for (const alarm of grouped) {
      const kind = alarm.AlarmName.replace('TokenBroker-scale-all-sets-', '');
      const single = perSet.get(kind);
      if (!single) throw new Error(`no per-set alarm ${kind}`);
      const [query] = alarm.Metrics ?? [];
      const parsed = parseQuery(query?.Expression ?? '');
      expect(parsed, `${alarm.AlarmName}: ${query?.Expression}`).toBeDefined();
      // The metric, the statistic and the exact dimensions of the per-set alarm (SCHEMA matches exactly these).
      expect(parsed?.metric, kind).toBe(single.MetricName);
      expect(parsed?.fn, kind).toBe(STATISTIC_FUNCTIONS[single.Statistic ?? '']);
      expect(parsed?.dimensions, kind).toEqual((single.Dimensions ?? []).map((d) => d.Name).sort());
      expect(single.Dimensions?.find((d) => d.Name === 'service')?.Value).toBe('token-broker');
      // Breaching series first: they stay among those evaluated past Metrics Insights' 500.
      expect(parsed?.orderFn, kind).toBe(parsed?.fn);
      expect(parsed?.order, kind).toBe(single.ComparisonOperator === 'LessThanThreshold' ? 'ASC' : 'DESC');
      expect(parsed?.limit, kind).toBeUndefined();
      expect(query?.Period, kind).toBe(single.Period);
      for (const key of [
        'Threshold',
        'ComparisonOperator',
        'EvaluationPeriods',
        'DatapointsToAlarm',
        'TreatMissingData',
        'AlarmActions',
        'OKActions',
      ] as const) {
        expect(alarm[key], `${kind} ${key}`).toEqual(single[key]);
      }
    }
    // The tuned values did reach the alarms (the stage's settings, not the defaults).
    const byKind = (k: string) => grouped.find((a) => a.AlarmName.endsWith(`-all-sets-${k}`));
    if (few === tunedSmall) {
      expect(byKind('vendor-unavailable')?.EvaluationPeriods).toBe(4);
      expect(byKind('vendor-unavailable')?.Metrics?.[0]?.Period).toBe(600);
      expect(byKind('permit-denials-sustained')?.Threshold).toBe(40);
      expect(byKind('permit-denials-sustained')?.DatapointsToAlarm).toBe(2);
      expect(byKind('token-validity-low')?.Threshold).toBe(1500);
    }
  });

  it('are valid Metrics Insights alarms as CloudFormation takes them', () => {
    expect(groupedOf(large)).toHaveLength(KINDS_PER_SET);
    for (const alarm of groupedOf(large)) {
      const all = alarm as unknown as Json;
      // Metrics excludes the single-metric properties.
      for (const key of [
        'MetricName',
        'Namespace',
        'Statistic',
        'ExtendedStatistic',
        'Period',
        'Dimensions',
      ]) {
        expect(all[key], `${alarm.AlarmName} ${key}`).toBeUndefined();
      }
      expect(alarm.Metrics).toHaveLength(1);
      const [query] = alarm.Metrics ?? [];
      expect(query?.Id).toMatch(/^[a-z][a-zA-Z0-9_]*$/);
      expect(query?.ReturnData).toBe(true);
      expect((query as Json).MetricStat).toBeUndefined();
      expect(query?.Expression?.length).toBeLessThanOrEqual(2048);
      expect(Number.isInteger(query?.Period) && (query?.Period ?? 0) % 60 === 0).toBe(true);
      expect(alarm.EvaluationPeriods * (query?.Period ?? 0)).toBeLessThanOrEqual(INSIGHTS_WINDOW_SECONDS);
      expect(alarm.DatapointsToAlarm).toBeLessThanOrEqual(alarm.EvaluationPeriods);
      expect(alarm.AlarmDescription.length).toBeLessThanOrEqual(1024);
    }
  });

  it('say what they mean, how to find the sets, and which runbook section to open; and notify on ALARM and OK', () => {
    const perSet = perSetByKind(small);
    expect(groupedOf(large)).toHaveLength(KINDS_PER_SET);
    // The runbook says how grouped alarms work and how to find their sets; each kind's section links there.
    expect(runbookAnchors.has('which-set-grouped-alarms-of-large-stages')).toBe(true);
    for (const alarm of large.alarms) {
      expect(alarm.AlarmActions, alarm.AlarmName).toEqual([{ Ref: large.topicId }]);
      expect(alarm.OKActions, alarm.AlarmName).toEqual([{ Ref: large.topicId }]);
      const anchor = anchorOf(alarm);
      expect(runbookAnchors.has(anchor ?? ''), `${alarm.AlarmName} → #${anchor}`).toBe(true);
    }
    for (const alarm of groupedOf(large)) {
      const kind = alarm.AlarmName.replace('TokenBroker-scale-all-sets-', '');
      expect(anchorOf(alarm), kind).toBe(anchorOf(perSet.get(kind) as AlarmProperties));
      expect(alarm.AlarmDescription, kind).toContain('credential set');
      expect(alarm.AlarmDescription, kind).toContain('contributors');
      expect(alarm.AlarmDescription, kind).toContain('aws cloudwatch describe-alarm-contributors');
      expect(alarm.AlarmDescription, kind).toContain('dashboard');
      expect(alarm.AlarmDescription, kind).toContain('token-broker status');
    }
  });

  it('fail synth when a grouped alarm would span more than the 3 hours Metrics Insights evaluates', () => {
    // 7 runs of 30 minutes: 210 minutes. Fine per set (a plain alarm looks back as far as it likes).
    const longRuns = (sets: number) =>
      stageOfSize(sets, {
        refreshScheduleMinutes: 30,
        alarms: { emails: ['a@example.com'], vendorUnavailablePeriods: 7 },
      });
    const withSlowRefresh = (input: StageInput): StageInput => ({
      ...input,
      credentialSets: input.credentialSets.map((set) => ({
        ...set,
        refresh: { softThresholdSeconds: 7200, hardFloorSeconds: 300 },
      })),
    });
    expect(() => synthesizeMonitoring(withSlowRefresh(longRuns(PER_SET_ALARMS_MAX_SETS)))).not.toThrow();
    expect(() => synthesizeMonitoring(withSlowRefresh(longRuns(PER_SET_ALARMS_MAX_SETS + 1)))).toThrow(
      ConfigurationError,
    );
    expect(() => synthesizeMonitoring(withSlowRefresh(longRuns(PER_SET_ALARMS_MAX_SETS + 1)))).toThrow(
      /alarms\.vendorUnavailablePeriods \(7\) × 30 min is 210 min.*refreshScheduleMinutes/,
    );
  });
});

describe('the threshold between per-set and grouped alarms', () => {
  it(`keeps per-set alarms up to ${PER_SET_ALARMS_MAX_SETS} sets and groups them from ${PER_SET_ALARMS_MAX_SETS + 1}`, () => {
    const atMost = synthesizeMonitoring(stageOfSize(PER_SET_ALARMS_MAX_SETS));
    expect(atMost.alarms).toHaveLength(KINDS_PER_SET * PER_SET_ALARMS_MAX_SETS + OTHER_ALARMS);
    for (const set of atMost.stage.credentialSets) {
      const own = atMost.alarms.filter((a) => a.AlarmName.startsWith(`TokenBroker-scale-${set.id}-`));
      expect(own, set.id).toHaveLength(KINDS_PER_SET);
      for (const alarm of own) {
        expect(alarm.Dimensions).toContainEqual({ Name: 'CredentialSet', Value: set.id });
        expect(alarm.AlarmDescription).toContain(set.id);
      }
    }
    // Only the alarms over every set whatever the size: a class limit below its configuration, or raised (rare).
    expect(
      atMost.alarms
        .filter((a) => a.Metrics?.some((q) => q.Expression?.startsWith('SELECT')))
        .map((a) => a.AlarmName),
    ).toEqual(['TokenBroker-scale-classes-limit-below-configured', 'TokenBroker-scale-classes-limit-raised']);

    const above = synthesizeMonitoring(stageOfSize(PER_SET_ALARMS_MAX_SETS + 1));
    expect(above.alarms).toHaveLength(KINDS_PER_SET + OTHER_ALARMS);
    expect(groupedOf(above)).toHaveLength(KINDS_PER_SET);
  });
});

describe('alarms and dashboard together', () => {
  it('add well under 100 resources for 100 sets (and a third of a stack at most below the threshold)', () => {
    // The alarms and the dashboard, nothing else.
    expect(large.ownResources).toBe(large.alarms.length + 1);
    expect(large.ownResources).toBeLessThan(100);
    const atMost = synthesizeMonitoring(stageOfSize(PER_SET_ALARMS_MAX_SETS));
    expect(atMost.ownResources).toBeLessThan(STACK_RESOURCES_MAX / 3);
  });
});

describe('the dashboard', () => {
  const widgetsOf = (m: Monitoring) => m.dashboardBody.widgets as { type: string; properties: Json }[];
  const alarmWidgetsOf = (m: Monitoring) => widgetsOf(m).filter((w) => w.type === 'alarm');
  const listedAlarms = (m: Monitoring) => alarmWidgetsOf(m).flatMap((w) => w.properties.alarms as string[]);
  const arnOf = (m: Monitoring, a: AlarmProperties) =>
    `arn:aws:cloudwatch:${m.stage.region}:${m.stage.account}:alarm:${a.AlarmName}`;

  it('of 100 sets has far fewer than 500 widgets, the same number as for 21 or 60 sets, and a small body', () => {
    const widgets = widgetsOf(large).length;
    expect(widgets).toBeLessThan(DASHBOARD_WIDGETS_MAX / 10);
    expect(widgetsOf(synthesizeMonitoring(stageOfSize(PER_SET_ALARMS_MAX_SETS + 1)))).toHaveLength(widgets);
    expect(widgetsOf(synthesizeMonitoring(stageOfSize(60)))).toHaveLength(widgets);
    expect(large.dashboardBodyBytes).toBeLessThan(1_000_000 / 10);
  });

  it('of 100 sets draws every set-level graph across all sets, the worst ones named by set, and no row per set', () => {
    const body = JSON.stringify(large.dashboardBody);
    for (const set of large.stage.credentialSets) expect(body).not.toContain(set.id);
    // The set-level graphs: those drawing the broker's metrics (by query, or by namespace as a per-set row
    // would); the functions' and tables' graphs draw AWS/Lambda and AWS/DynamoDB metrics.
    const ours = (entry: unknown[]) =>
      entry[0] === 'TokenBroker' || typeof (entry[0] as { expression?: unknown })?.expression === 'string';
    // The per-consumer permit graph is grouped by set and consumer: test/infra-accounting.test.ts.
    const graphs = widgetsOf(large).filter(
      (w) =>
        w.type === 'metric' &&
        (w.properties.metrics as unknown[][]).some(ours) &&
        !String(w.properties.title).startsWith('Permits per consumer'),
    );
    expect(graphs.length).toBeGreaterThanOrEqual(10);
    for (const graph of graphs) {
      const metrics = graph.properties.metrics as [{ expression?: string; label?: string }][];
      for (const [metric] of metrics) {
        const parsed = parseQuery(metric.expression ?? '');
        expect(parsed, `${graph.properties.title}: ${metric.expression}`).toBeDefined();
        expect(parsed?.limit).toBeGreaterThan(0);
        expect(parsed?.limit).toBeLessThanOrEqual(10);
        expect(metric.label, String(graph.properties.title)).toMatch(/^\$\{LABEL\}/);
      }
    }
    // Every per-set alarm's metric has its graph.
    const drawn = new Set(
      graphs.flatMap((g) =>
        (g.properties.metrics as [{ expression?: string }][]).map(
          ([m]) => parseQuery(m.expression ?? '')?.metric,
        ),
      ),
    );
    for (const alarm of perSetByKind(small).values()) expect(drawn).toContain(alarm.MetricName);
    // ... and the metrics of the alarms over every set at any size: class limits below configuration, raised.
    expect(drawn).toContain(Metric.ClassLimitBelowConfigured);
    expect(drawn).toContain(Metric.ClassLimitRaised);
    // A small stage draws them in each set's row, side by side.
    const row = widgetsOf(small).find((w) =>
      String(w.properties.title).endsWith(`${small.stage.credentialSets[0]?.id}: vending and permits`),
    );
    const labels = ((row?.properties.metrics ?? []) as [{ label?: string }][]).map(([m]) => m.label);
    expect(labels.indexOf(Metric.ClassLimitRaised)).toBe(
      labels.indexOf(Metric.ClassLimitBelowConfigured) + 1,
    );
  });

  it('lists every alarm, at most 100 to an alarm status widget', () => {
    const atMost = synthesizeMonitoring(stageOfSize(PER_SET_ALARMS_MAX_SETS));
    for (const m of [small, atMost, large]) {
      for (const widget of alarmWidgetsOf(m)) {
        expect((widget.properties.alarms as string[]).length).toBeLessThanOrEqual(
          ALARM_STATUS_WIDGET_ALARMS_MAX,
        );
      }
      expect(listedAlarms(m).sort()).toEqual(m.alarms.map((a) => arnOf(m, a)).sort());
    }
    expect(alarmWidgetsOf(small)).toHaveLength(1);
    expect(alarmWidgetsOf(atMost).length).toBeGreaterThan(1);
  });
});
