import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { consumerInsightsQuery, Metric, PERMIT_METRICS } from '../../shared/metric-names.js';

/**
 * `token-broker status --consumers`: per set, the permits each consumer was granted, gave back and was denied
 * over a recent window, read from CloudWatch (the vend function's per-consumer series: PermitsGranted,
 * PermitsReturned, PermitsDenied with dimensions CredentialSet and Consumer).
 *
 * Why CloudWatch and not the broker: the broker stores nothing per caller beyond what the ledger keeps (a
 * receipt carries a hash of the caller, the ledger item only counts per window), and keeping per-consumer
 * counts in the ledger would add a write to every permit request and contention on the busiest tokens. The
 * metrics are written anyway (EMF, no extra call), so the operator reads them with their own credentials:
 * `cloudwatch:GetMetricData` (no resource-level permissions: Resource "*"). The vend function gets no new
 * permission.
 *
 * One Metrics Insights query per set and metric (GetMetricData takes one such query per call), grouped by
 * Consumer: a set's consumers are at most the stage's 500, the most series a query returns, so no consumer is
 * left out. Metrics Insights through GetMetricData reads the latest 3 hours: the window is at most that.
 */

/** Metrics Insights via GetMetricData: the latest three hours. */
export const CONSUMER_WINDOW_MAX_SECONDS = 3 * 3600;
export const CONSUMER_WINDOW_DEFAULT_SECONDS = 3600;
/** A stage's consumers at most (stage config): the series one set's query may return. */
const SERIES_PER_SET_MAX = 500;
/** GetMetricData calls in flight at once (its default quota is 50 a second per Region). */
const CONCURRENCY = 4;

export interface ConsumerPermits {
  consumer: string;
  granted: number;
  returned: number;
  denied: number;
}

const FIELD: Record<(typeof PERMIT_METRICS)[number], 'granted' | 'returned' | 'denied'> = {
  [Metric.PermitsGranted]: 'granted',
  [Metric.PermitsReturned]: 'returned',
  [Metric.PermitsDenied]: 'denied',
};

/** One query's series: consumer name to the sum of its values over the window. */
async function querySums(
  client: CloudWatchClient,
  expression: string,
  startMs: number,
  endMs: number,
  windowSeconds: number,
): Promise<Map<string, number>> {
  // Loaded here: `status` without --consumers does not load the CloudWatch SDK.
  const { GetMetricDataCommand } = await import('@aws-sdk/client-cloudwatch');
  const sums = new Map<string, number>();
  let nextToken: string | undefined;
  do {
    const answer = await client.send(
      new GetMetricDataCommand({
        StartTime: new Date(startMs),
        EndTime: new Date(endMs),
        MetricDataQueries: [
          { Id: 'permits', Expression: expression, Period: windowSeconds, ReturnData: true },
        ],
        ...(nextToken ? { NextToken: nextToken } : {}),
      }),
    );
    for (const result of answer.MetricDataResults ?? []) {
      // A grouped series' label is its group: the consumer's name (the config's, as the function emitted it).
      const consumer = result.Label;
      if (!consumer) continue;
      const total = (result.Values ?? []).reduce((a, b) => a + b, 0);
      sums.set(consumer, (sums.get(consumer) ?? 0) + total);
    }
    nextToken = answer.NextToken;
  } while (nextToken);
  return sums;
}

/** Runs `tasks` at most `limit` at a time, results in order. */
async function inBatches<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await (tasks[index] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

/**
 * Per set id, its consumers' permits over the `windowSeconds` up to `endMs` (whole minutes), busiest first.
 * A consumer with no permit in the window has no data point and is not listed.
 */
export async function readConsumerPermits(
  client: CloudWatchClient,
  setIds: string[],
  options: { endMs: number; windowSeconds: number },
): Promise<Map<string, ConsumerPermits[]>> {
  const endMs = Math.floor(options.endMs / 60_000) * 60_000;
  const startMs = endMs - options.windowSeconds * 1000;
  const jobs = setIds.flatMap((setId) =>
    PERMIT_METRICS.map((name) => ({
      setId,
      name,
      run: () =>
        querySums(
          client,
          consumerInsightsQuery(name, { setId, limit: SERIES_PER_SET_MAX }),
          startMs,
          endMs,
          options.windowSeconds,
        ),
    })),
  );
  const sums = await inBatches(
    jobs.map((job) => job.run),
    CONCURRENCY,
  );
  const bySet = new Map<string, Map<string, ConsumerPermits>>(setIds.map((id) => [id, new Map()]));
  jobs.forEach((job, i) => {
    const consumers = bySet.get(job.setId) as Map<string, ConsumerPermits>;
    for (const [consumer, total] of sums[i] ?? []) {
      const entry = consumers.get(consumer) ?? { consumer, granted: 0, returned: 0, denied: 0 };
      entry[FIELD[job.name]] += total;
      consumers.set(consumer, entry);
    }
  });
  return new Map(
    [...bySet].map(([setId, consumers]) => [
      setId,
      [...consumers.values()].sort(
        (a, b) => b.granted + b.denied - (a.granted + a.denied) || a.consumer.localeCompare(b.consumer),
      ),
    ]),
  );
}
