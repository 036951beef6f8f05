import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { createRefresherHandler } from '../functions/refresher-handler.js';
import { Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { refresherSuite, SCHEDULED_EVENT } from './support/refresher-harness.js';

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

    await handler(SCHEDULED_EVENT, context);
    await handler(SCHEDULED_EVENT, context);
    expect(heartbeats()).toEqual([
      { name: Metric.ScheduledRun, unit: 'Count', value: 1, dimensions: {} },
      { name: Metric.ScheduledRun, unit: 'Count', value: 1, dimensions: {} },
    ]);
  });
});
