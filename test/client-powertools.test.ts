import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { powertoolsTelemetry } from '../client/index.js';
import { type BrokerWorld, eventually, SET_ID, startBrokerWorld } from './support/client-world.js';
import { expectNoSecrets } from './support/refresher-harness.js';

/**
 * powertoolsTelemetry with the real Powertools packages (the client package declares neither: its types are
 * structural): a BrokerClient against the local broker logs through a Powertools Logger, and metric points go
 * out as Powertools' EMF. Both write JSON lines to the process's stdout (WARN and ERROR to stderr), captured here.
 */
describe('powertoolsTelemetry: a Powertools Logger and Metrics as the client telemetry', () => {
  let w: BrokerWorld;
  /** What Powertools wrote (stdout and stderr). */
  let stdout: string[];
  beforeEach(async () => {
    w = await startBrokerWorld();
    stdout = [];
    // Powertools writes DEBUG and INFO lines and EMF to stdout, WARN and ERROR to stderr: both are kept, in order.
    for (const stream of [process.stdout, process.stderr]) {
      vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
        stdout.push(String(chunk));
        return true;
      });
    }
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await w.close();
  });

  const jsonLines = () =>
    stdout
      .join('')
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  it("writes the client's log lines as the Logger's JSON, at their level, with their attributes and no token", async () => {
    const logger = new Logger({ serviceName: 'orders', logLevel: 'DEBUG' });
    const client = w.client({ telemetry: powertoolsTelemetry({ logger }) });
    const token = await client.getToken(SET_ID);
    const permit = await client.acquirePermit(SET_ID, token.tokenId);
    expect(permit.giveBack()).toBe(true);
    await client.close();
    await eventually(() => jsonLines().some((line) => line.message === 'permits given back'));

    const lines = jsonLines();
    expect(lines.find((line) => line.message === 'token vended')).toMatchObject({
      level: 'DEBUG',
      service: 'orders',
      credentialSet: SET_ID,
      tokenId: token.tokenId,
      expiresAt: token.expiresAt,
    });
    expect(lines.find((line) => line.message === 'permits given back')).toMatchObject({
      level: 'DEBUG',
      service: 'orders',
      credentialSet: SET_ID,
      tokenId: token.tokenId,
      count: 1,
    });
    expectNoSecrets(stdout.join(''), []);
    expect(stdout.join('')).not.toContain(token.accessToken);
  });

  it('a warning reaches the Logger at WARN with its attributes', async () => {
    const logger = new Logger({ serviceName: 'orders', logLevel: 'WARN' });
    const client = w.client({ telemetry: powertoolsTelemetry({ logger }) });
    const token = await client.getToken(SET_ID);
    // A rate-limit report for a token the broker never vended fails (403/404): best effort, a warning.
    const report = await client.reportRateLimit(SET_ID, '0000000000000000', {
      status: 429,
      headers: { 'Retry-After': '1' },
    });
    await client.close();
    expect(report.reported).toBe(false);
    const warning = jsonLines().find((line) => line.message === 'rate-limit report failed');
    expect(warning).toMatchObject({ level: 'WARN', service: 'orders', credentialSet: SET_ID });
    // The level filter is the Logger's: no DEBUG line (token vended) at WARN.
    expect(jsonLines().filter((line) => line.level === 'DEBUG')).toEqual([]);
    expect(stdout.join('')).not.toContain(token.accessToken);
  });

  it("publishes a metric point as Powertools' EMF, once with its dimensions and once more with alsoBy's", () => {
    // The client itself emits no metric today (its telemetry is logs); a service that shares the adapter with
    // its own code, and a later client, write points like this one.
    const logger = new Logger({ serviceName: 'orders', logLevel: 'WARN' });
    const metrics = new Metrics({ namespace: 'Orders', serviceName: 'orders' });
    const telemetry = powertoolsTelemetry({ logger, metrics });
    telemetry.metric('VendorCalls', 'Count', 3, { CredentialSet: SET_ID }, { Consumer: 'orders-api' });

    const emf = jsonLines().filter((line) => '_aws' in line) as Array<
      Record<string, unknown> & {
        _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: unknown[] }[] };
      }
    >;
    expect(emf).toHaveLength(2);
    expect(emf[0]).toMatchObject({ VendorCalls: 3, CredentialSet: SET_ID, service: 'orders' });
    expect(emf[0]?._aws.CloudWatchMetrics[0]).toMatchObject({
      Namespace: 'Orders',
      Metrics: [{ Name: 'VendorCalls', Unit: 'Count' }],
    });
    expect(emf[0]?._aws.CloudWatchMetrics[0]?.Dimensions.map((set) => [...set].sort())).toEqual([
      ['CredentialSet', 'service'],
    ]);
    expect(emf[1]).toMatchObject({ VendorCalls: 3, CredentialSet: SET_ID, Consumer: 'orders-api' });
    expect(emf[1]?._aws.CloudWatchMetrics[0]?.Dimensions.map((set) => [...set].sort())).toEqual([
      ['Consumer', 'CredentialSet', 'service'],
    ]);
  });

  it('without metrics, a point is dropped and nothing is written', () => {
    const logger = new Logger({ serviceName: 'orders', logLevel: 'DEBUG' });
    powertoolsTelemetry({ logger }).metric('VendorCalls', 'Count', 1);
    expect(stdout.join('')).toBe('');
  });
});
