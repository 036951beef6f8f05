import {
  CloudWatchClient,
  CloudWatchServiceException,
  GetMetricDataCommand,
  type GetMetricDataCommandInput,
} from '@aws-sdk/client-cloudwatch';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../shared/clock.js';
import { type CliBroker, cliBrokerPerFile, ONCALL, runIn, SANDBOX_PASSWORDS } from './support/cli-harness.js';

/**
 * `token-broker status --consumers`: the broker's health from the local broker (real, over SigV4), each
 * consumer's permits from CloudWatch's per-consumer series. CloudWatch has no local stand-in: aws-sdk-client-mock
 * answers GetMetricData, as CloudWatch would for the Metrics Insights query the CLI sends.
 */
const cloudWatch = mockClient(CloudWatchClient);
let b: CliBroker;
let clock: ManualClock;
const regions: string[] = [];
const factory = (region: string) => {
  regions.push(region);
  return new CloudWatchClient({ region, credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' } });
};
const asOncall = (argv: string[]) =>
  runIn(['status', ...argv], { env: { ...b.env, ...ONCALL }, clock, cloudWatch: factory });

/** What CloudWatch holds: per set, metric and consumer, the data points of the window. */
const HELD: Record<string, Record<string, Record<string, number[]>>> = {
  'uat-advisor': {
    PermitsGranted: { portfolio: [6, 4], batch: [40] },
    PermitsReturned: { portfolio: [3], batch: [10] },
    PermitsDenied: { portfolio: [2], batch: [6] },
  },
  'prod-advisor': { PermitsGranted: { reporting: [1] } },
};
const QUERY =
  /^SELECT SUM\((\w+)\) FROM SCHEMA\("TokenBroker", Consumer, CredentialSet, service\) WHERE service = 'token-broker' AND CredentialSet = '([\w-]+)' GROUP BY Consumer ORDER BY SUM\(\) DESC LIMIT 500$/;

function answer(input: GetMetricDataCommandInput) {
  const [query] = input.MetricDataQueries ?? [];
  const [, metric = '', setId = ''] = QUERY.exec(query?.Expression ?? '') ?? [];
  const series = Object.entries(HELD[setId]?.[metric] ?? {});
  // Two pages when there are two series, as GetMetricData pages its results.
  const page = input.NextToken === undefined ? series.slice(0, 1) : series.slice(1);
  return {
    MetricDataResults: page.map(([consumer, values]) => ({
      Id: query?.Id,
      Label: consumer,
      Values: values,
      Timestamps: values.map(() => new Date(0)),
      StatusCode: 'Complete' as const,
    })),
    ...(input.NextToken === undefined && series.length > 1 ? { NextToken: 'page-2' } : {}),
  };
}

cliBrokerPerFile((started) => {
  b = started;
  clock = started.clock as ManualClock;
});
beforeEach(() => {
  cloudWatch.reset();
  regions.length = 0;
  cloudWatch.on(GetMetricDataCommand).callsFake(answer);
});
const sent = () => cloudWatch.commandCalls(GetMetricDataCommand).map((call) => call.args[0].input);

describe('token-broker status --consumers', () => {
  it('adds a column of each consumer’s permits granted/returned/denied over the window, from CloudWatch', async () => {
    const run = await asOncall(['--consumers', '--metrics-region', 'eu-west-1']);
    expect(run.exit, run.stderr).toBe(0);
    const [header, ...rows] = (run.stdout.trim().split('\n\n')[0] ?? '').split('\n');
    expect(header).toContain('PERMITS PER CONSUMER (1h) granted/returned/denied');
    const row = (id: string) => rows.find((line) => line.startsWith(`${id} `)) ?? '';
    expect(row('uat-advisor')).toContain('batch 40/10/6, portfolio 10/3/2');
    expect(row('prod-advisor')).toContain('reporting 1/0/0');
    expect(row('uat-execution')).toMatch(/\bnone\b/);
    // One query per set and metric, in the stage's Region, over the last hour in whole minutes.
    const queries = sent();
    const pages = queries.filter((q) => q.NextToken !== undefined).length;
    expect(queries).toHaveLength(4 * 3 + pages);
    expect(pages).toBe(3);
    expect(new Set(regions)).toEqual(new Set(['eu-west-1']));
    for (const query of queries) {
      expect(query.MetricDataQueries).toHaveLength(1);
      expect(query.MetricDataQueries?.[0]?.Expression).toMatch(QUERY);
      expect(query.MetricDataQueries?.[0]?.Period).toBe(3600);
      const end = query.EndTime as Date;
      expect(end.getTime() % 60_000).toBe(0);
      expect(end.getTime() - (query.StartTime as Date).getTime()).toBe(3600_000);
      expect(end.getTime()).toBeLessThanOrEqual(clock.now());
    }
    expect(new Set(queries.map((q) => QUERY.exec(q.MetricDataQueries?.[0]?.Expression ?? '')?.[2]))).toEqual(
      new Set(['uat-advisor', 'uat-execution', 'prod-advisor', 'prod-execution']),
    );
    for (const password of SANDBOX_PASSWORDS) expect(run.stdout + run.stderr).not.toContain(password);
    expect(run.stdout + run.stderr).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
    expect(run.stdout + run.stderr).not.toContain(ONCALL.AWS_SECRET_ACCESS_KEY);
  });

  it('prints the figures in --json, for the sets named, over the window asked for', async () => {
    const run = await asOncall([
      'uat-advisor',
      '--consumers',
      '--window',
      '600',
      '--metrics-region',
      'eu-west-1',
      '--json',
    ]);
    expect(run.exit, run.stderr).toBe(0);
    const json = JSON.parse(run.stdout) as { credentialSets: { id: string; consumerPermits: unknown }[] };
    expect(json.credentialSets).toEqual([
      expect.objectContaining({
        id: 'uat-advisor',
        consumerPermits: {
          windowSeconds: 600,
          consumers: [
            { consumer: 'batch', granted: 40, returned: 10, denied: 6 },
            { consumer: 'portfolio', granted: 10, returned: 3, denied: 2 },
          ],
        },
      }),
    ]);
    expect(sent().every((q) => q.MetricDataQueries?.[0]?.Period === 600)).toBe(true);
    // Without --consumers, CloudWatch is not asked and the entries have no such field.
    cloudWatch.resetHistory();
    const plain = await asOncall(['uat-advisor', '--json']);
    expect(JSON.parse(plain.stdout).credentialSets[0]).not.toHaveProperty('consumerPermits');
    expect(sent()).toEqual([]);
  });

  it('says unknown when CloudWatch refuses, names the permission, quotes nothing of the error, exits 0', async () => {
    cloudWatch.on(GetMetricDataCommand).rejects(
      new CloudWatchServiceException({
        name: 'AccessDeniedException',
        $fault: 'client',
        $metadata: {},
        message:
          'User: arn:aws:sts::123456789012:assumed-role/token-broker-oncall/jane is not authorized to perform: cloudwatch:GetMetricData',
      }),
    );
    const run = await asOncall(['--consumers', '--metrics-region', 'eu-west-1']);
    expect(run.exit).toBe(0);
    expect(
      (run.stdout.trim().split('\n\n')[0] ?? '')
        .split('\n')
        .slice(1)
        .every((line) => line.includes('unknown')),
    ).toBe(true);
    expect(run.stderr).toContain('(AccessDeniedException); the operator needs cloudwatch:GetMetricData');
    expect(run.stdout + run.stderr).not.toContain('arn:aws:sts');
  });

  it('refuses what it cannot honour: a local broker’s Region, a window beyond 3 hours, --window alone', async () => {
    const local = await asOncall(['--consumers']);
    expect(local.exit).toBe(2);
    expect(local.stderr).toContain('--consumers reads CloudWatch');
    for (const window of ['10860', '30', '90', 'soon']) {
      const run = await asOncall(['--consumers', '--window', window, '--metrics-region', 'eu-west-1']);
      expect(run.exit, window).toBe(2);
      expect(run.stderr).toContain('--window');
    }
    const alone = await asOncall(['--window', '600']);
    expect(alone.exit).toBe(2);
    expect(alone.stderr).toContain('go with --consumers');
    expect(sent()).toEqual([]);
  });
});
