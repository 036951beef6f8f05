import type { BrokerClient } from '../../client/broker-client.js';
import type { BrokerClientOptions, VendedToken } from '../../client/types.js';
import type { MemoryTelemetry } from '../../shared/observability.js';
import type { BrokerWorld } from './client-world.js';

/**
 * What the tests of which failed vendor requests the client sends again share: test/client-resend.test.ts
 * (`npm test`) and test/client-resend-timeouts.test.ts (its requests time out in real time: `npm run test:long`).
 * The vendor is the sandbox over HTTP; "what the vendor saw" is the sandbox's own count of resource requests
 * received (counted on arrival, answered or not).
 */

export const resource = (key: string) => (token: VendedToken) =>
  `/users/42/${token.tenant}/serviceKey/${key}`;
/**
 * Per attempt, real time: the hang always outlasts it, and an answered request always beats it, whatever the
 * machine's load (at 50 ms, a retry answered at once still timed out on a loaded 2-core machine).
 */
export const TIMEOUT_MS = 2_000;

export const notResent = (telemetry: MemoryTelemetry) =>
  telemetry.logs.filter(
    (l) => l.message === 'vendor call failed; not re-sent, the vendor may have acted on it',
  );

/** What the vendor saw of the world's resources, by method. */
export const seenBy = (w: BrokerWorld) => w.sandbox.stats().resourceRequests;

/** A client whose backoff waits are 201 ms, 401 ms … on the world's clock: nothing retries until it moves. */
export const resendClient = (
  w: BrokerWorld,
  telemetry: MemoryTelemetry,
  options: Partial<BrokerClientOptions> = {},
): BrokerClient =>
  w.client({ vendorTimeoutMs: TIMEOUT_MS, telemetry, retry: { random: () => 1 }, ...options });
