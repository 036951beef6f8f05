import type { Context, ScheduledEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { createRefresherHandler } from '../functions/refresher-handler.js';
import { Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { refresherSuite } from './support/refresher-harness.js';

// As AWS documents the event of an EventBridge rule with a schedule expression.
const scheduledEvent: ScheduledEvent = {
  version: '0',
  id: '7bf73129-1428-4cd3-a780-95db273d1602',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '123456789012',
  time: '2026-01-05T09:05:00Z',
  region: 'eu-west-1',
  resources: ['arn:aws:events:eu-west-1:123456789012:rule/token-broker-uat-Schedule'],
  detail: {},
};
const context = { awsRequestId: 'c6af9ac6-7b61-11e6-9a41-93e812345679' } as Context;

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const suite = refresherSuite(T0);

/**
 * The schedule's heartbeat: the refresher-not-running alarm counts ScheduledRun, so only runs the schedule
 * started may emit it. On-demand re-logins (vend's synchronous invokes) run the same function and must not,
 * or vend traffic would hide a schedule that stopped.
 */
describe('the ScheduledRun heartbeat', () => {
  it('is emitted once per scheduled run, and not for on-demand refreshes or refused events', async () => {
    const { world, set } = await suite.advisorWorld();
    const telemetry = new MemoryTelemetry();
    const handler = createRefresherHandler({ refresher: world.refresher('lambda-1', [set]), telemetry });
    const heartbeats = () => telemetry.metrics.filter((m) => m.name === Metric.ScheduledRun);

    await handler({ action: 'refresh', credentialSetId: set.id, reason: 'NO_USABLE_TOKEN' }, context);
    await handler(
      {
        action: 'refresh',
        credentialSetId: set.id,
        reason: 'TOKEN_REJECTED',
        rejectedTokenId: 'f'.repeat(16),
      },
      context,
    );
    await expect(handler({ 'detail-type': 'Scheduled Event', source: 'not.aws' }, context)).rejects.toThrow();
    expect(suite.uat.stats().loginRequests).toBeGreaterThan(0);
    expect(heartbeats()).toEqual([]);

    await handler(scheduledEvent, context);
    await handler(scheduledEvent, context);
    expect(heartbeats()).toEqual([
      { name: Metric.ScheduledRun, unit: 'Count', value: 1, dimensions: {} },
      { name: Metric.ScheduledRun, unit: 'Count', value: 1, dimensions: {} },
    ]);
  });
});
