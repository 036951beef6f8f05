import { BrokerClient } from '../client/broker-client.js';
import type { BrokerTarget } from './broker-target.js';
import type { CliIo } from './io.js';

/**
 * The client a command talks to the broker with: the target's URL, Region and credentials, the CLI's clock. Apart
 * from broker-target.ts, so that `status` (which reads the list route itself) does not load the client.
 */
export function cliBrokerClient(target: BrokerTarget, io: CliIo): BrokerClient {
  return new BrokerClient({
    brokerUrl: target.url,
    region: target.region,
    credentials: target.credentials,
    clock: io.clock,
    fetch: io.fetch,
    userAgent: 'token-broker-cli',
  });
}
