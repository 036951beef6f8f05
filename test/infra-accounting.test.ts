import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { TOP_CONSUMERS } from '../infra/broker-metrics.js';
import {
  CONSUMERS_PER_SET_WIDGET_MAX,
  GRAPH_WIDGET_MAX_SERIES,
} from '../infra/constructs/broker-dashboard.js';
import { generateStage } from '../infra/tools/generate-stage.js';
import {
  DIMENSION_CONSUMER,
  DIMENSION_CREDENTIAL_SET,
  Metric,
  PERMIT_METRICS,
} from '../shared/metric-names.js';
import { MetricUnit } from '../shared/observability.js';
import { emittedDimensions } from './support/emitted-metrics.js';
import type { Json } from './support/infra-template.js';
import { type Monitoring, synthesizeMonitoring } from './support/monitoring-stack.js';

/**
 * The dashboard's permits-per-consumer widgets (issue 17): a widget per set up to 20 sets, one across all sets
 * above, every series within CloudWatch's limits, and queries of exactly the dimensions the vend function emits.
 */
interface Widget {
  type: string;
  properties: Json & { title?: string; metrics?: unknown[][] };
}
type Expression = { expression?: string; label?: string };

const widgetsOf = (m: Monitoring) => m.dashboardBody.widgets as unknown as Widget[];
const perConsumerWidgets = (m: Monitoring) =>
  widgetsOf(m).filter((w) => w.type === 'metric' && /permits per consumer/i.test(w.properties.title ?? ''));
const expressionsOf = (w: Widget) => (w.properties.metrics ?? []).map((entry) => entry[0] as Expression);

/** A per-consumer Metrics Insights query, taken apart. */
const CONSUMER_QUERY =
  /^SELECT SUM\((\w+)\) FROM SCHEMA\("TokenBroker", ([\w, ]+)\) WHERE service = 'token-broker'(?: AND CredentialSet = '([\w-]+)')? GROUP BY ([\w, ]+) ORDER BY SUM\(\) DESC LIMIT (\d+)$/;
const parse = (expression = '') => {
  const match = CONSUMER_QUERY.exec(expression);
  if (!match) return undefined;
  const [, metric, schema, setId, groupBy, limit] = match;
  return {
    metric,
    dimensions: (schema ?? '').split(', ').sort(),
    setId,
    groupBy: (groupBy ?? '').split(', ').sort(),
    limit: Number(limit),
  };
};

let small: Monitoring;
let large: Monitoring;
let crowded: Monitoring;

beforeAll(() => {
  small = synthesizeMonitoring(generateStage({ consumers: 10, sets: 2 }));
  large = synthesizeMonitoring(generateStage({ consumers: 500, sets: 100 }));
  // 200 consumers on 2 sets: each set has more consumers than one widget may draw.
  crowded = synthesizeMonitoring(generateStage({ consumers: 200, sets: 2 }));
}, 180_000);
afterEach(() => {
  vi.restoreAllMocks();
});

describe('permits per consumer on the dashboard', () => {
  it('of 2 sets: a widget per set, granted, returned and denied for every consumer of the set', () => {
    const widgets = perConsumerWidgets(small);
    expect(widgets.map((w) => w.properties.title)).toEqual(
      small.stage.credentialSets.map((set) => `${set.id}: permits per consumer`),
    );
    for (const [i, set] of small.stage.credentialSets.entries()) {
      const consumers = small.stage.consumers.filter((c) => c.credentialSets.includes(set.id)).length;
      const queries = expressionsOf(widgets[i] as Widget);
      expect(queries.map((q) => parse(q.expression)?.metric)).toEqual([...PERMIT_METRICS]);
      for (const query of queries) {
        expect(parse(query.expression)).toMatchObject({
          setId: set.id,
          groupBy: ['Consumer'],
          limit: consumers,
        });
        expect(query.label).toMatch(/^\$\{LABEL\} (granted|returned|denied)$/);
      }
    }
  });

  it('queries exactly the dimensions the vend function emits the per-consumer series with', () => {
    // One permit point, as the vend function writes it: per set, and per set and consumer.
    const emitted = emittedDimensions((t) =>
      t.metric(
        Metric.PermitsReturned,
        MetricUnit.Count,
        2,
        { [DIMENSION_CREDENTIAL_SET]: 'uat-role-000' },
        { [DIMENSION_CONSUMER]: 'service-0000' },
      ),
    );
    expect(emitted).toContainEqual(['Consumer', 'CredentialSet', 'service']);
    for (const m of [small, large]) {
      for (const widget of perConsumerWidgets(m)) {
        for (const query of expressionsOf(widget))
          expect(emitted).toContainEqual(parse(query.expression)?.dimensions);
      }
    }
  });

  it("of 2 sets: the per-set permit lines read the per-set series only (no SEARCH counting a consumer's twice)", () => {
    const body = JSON.stringify(small.dashboardBody);
    for (const name of PERMIT_METRICS)
      expect(body).not.toMatch(new RegExp(`SEARCH\\([^)]*MetricName=\\\\"${name}\\\\"`));
    const perSet = widgetsOf(small).find(
      (w) => w.properties.title === `${small.stage.credentialSets[0]?.id}: vending and permits`,
    );
    const drawn = (perSet?.properties.metrics ?? [])
      .filter((entry) => entry[0] === 'TokenBroker')
      .map((entry) => entry[1]);
    expect(drawn).toEqual([...PERMIT_METRICS]);
  });

  it('of a set with more consumers than a widget may draw: the busiest, within 500 series, said in the title', () => {
    const widgets = perConsumerWidgets(crowded);
    const crowdedSets = crowded.stage.credentialSets.filter(
      (set) =>
        crowded.stage.consumers.filter((c) => c.credentialSets.includes(set.id)).length >
        CONSUMERS_PER_SET_WIDGET_MAX,
    );
    expect(crowdedSets.length).toBeGreaterThan(0);
    for (const set of crowdedSets) {
      const widget = widgets.find((w) => w.properties.title?.startsWith(`${set.id}:`));
      const limits = expressionsOf(widget as Widget).map((q) => parse(q.expression)?.limit ?? Number.NaN);
      expect(limits).toEqual([
        CONSUMERS_PER_SET_WIDGET_MAX,
        CONSUMERS_PER_SET_WIDGET_MAX,
        CONSUMERS_PER_SET_WIDGET_MAX,
      ]);
      expect(limits.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(GRAPH_WIDGET_MAX_SERIES);
      expect(widget?.properties.title).toMatch(
        new RegExp(`the ${CONSUMERS_PER_SET_WIDGET_MAX} busiest of \\d+\\)$`),
      );
    }
  });

  it('of 100 sets and 500 consumers: one widget over all sets, the highest consumer and set pairs', () => {
    const widgets = perConsumerWidgets(large);
    expect(widgets).toHaveLength(1);
    const queries = expressionsOf(widgets[0] as Widget);
    expect(queries.map((q) => parse(q.expression)?.metric)).toEqual([...PERMIT_METRICS]);
    for (const query of queries) {
      expect(parse(query.expression)).toMatchObject({
        setId: undefined,
        groupBy: ['Consumer', 'CredentialSet'],
        limit: TOP_CONSUMERS,
      });
    }
    // Every graph within CloudWatch's 500 series: a query draws at most its LIMIT, a metric one.
    for (const widget of widgetsOf(large).filter((w) => w.type === 'metric')) {
      const series = expressionsOf(widget).reduce((n, q) => n + (parse(q.expression)?.limit ?? 1), 0);
      expect(series, widget.properties.title).toBeLessThanOrEqual(GRAPH_WIDGET_MAX_SERIES);
    }
    expect(widgetsOf(large).length).toBeLessThan(500);
    const body = JSON.stringify(large.dashboardBody);
    expect(body).not.toContain('service-0');
    expect(body).not.toContain('arn:aws:iam');
  });
});
