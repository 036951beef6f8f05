import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { Metric } from '../shared/metric-names.js';
import { MetricUnit, type Telemetry } from '../shared/observability.js';
import { InvalidRefreshRequestError } from '../shared/tokens/errors.js';
import type { RefreshOutcome, RefreshRequest } from '../shared/tokens/refresh-request.js';
import type { Refresher, RunSummary } from '../shared/tokens/refresher.js';

/** The vend function's synchronous invoke: one set, now. */
export type RefreshActionEvent = { action: 'refresh' } & RefreshRequest;

export interface RefresherHandlerDeps {
  refresher: Pick<Refresher, 'runScheduled' | 'refreshOne'>;
  /** Where the schedule's heartbeat (ScheduledRun) goes. */
  telemetry: Pick<Telemetry, 'metric'>;
  /** The Powertools logger behind the telemetry: stamps every line with the Lambda request id. */
  logger?: Logger;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

/** An EventBridge rule's scheduled event (aws-cdk-lib `Rule` with `Schedule.rate`). */
const isScheduledEvent = (event: unknown): boolean =>
  isObject(event) && event['detail-type'] === 'Scheduled Event' && event.source === 'aws.events';

/**
 * The refresher's Lambda handler: a scheduled event runs every set; `{ action: 'refresh', ...RefreshRequest }`
 * refreshes one set on demand. Either answer carries token ids, never a token. Anything else is refused
 * (InvalidRefreshRequestError) before anything is read or written.
 */
export function createRefresherHandler(deps: RefresherHandlerDeps) {
  const handler = middy(
    async (
      event: unknown,
      _context: Context,
      options?: { signal?: AbortSignal },
    ): Promise<RunSummary | RefreshOutcome> => {
      const signal = options?.signal ? { signal: options.signal } : {};
      if (isObject(event) && event.action === 'refresh') {
        const { action: _action, ...request } = event;
        return deps.refresher.refreshOne(request as RefreshRequest, signal);
      }
      if (isScheduledEvent(event)) {
        // The heartbeat counts the schedule's runs only: on-demand re-logins (vend traffic) must not hide a
        // schedule that stopped. Emitted as the run starts: a run that then fails is an error, not silence.
        deps.telemetry.metric(Metric.ScheduledRun, MetricUnit.Count, 1);
        return deps.refresher.runScheduled(signal);
      }
      throw new InvalidRefreshRequestError(
        'event must be an EventBridge scheduled event or {"action": "refresh", "credentialSetId": ..., "reason": ...}',
      );
    },
  );
  return deps.logger ? handler.use(injectLambdaContext(deps.logger)) : handler;
}
