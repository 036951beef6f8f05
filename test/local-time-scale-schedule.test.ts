import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { type LocalBroker, startLocalBroker } from '../local/broker.js';
import { type LoadedLocalConfig, loadLocalConfig } from '../local/config.js';
import { MemoryTelemetry } from '../shared/observability.js';
// The broker's own schedule (a timer) on the system clock: this file waits on real time (docs/testing.md).
import './support/real-time.js';

const SCALE = 1440; // 4 h tokens live 10 s; the 5-minute schedule runs every 0.2 s

/**
 * The local broker with TIME_SCALE on its real schedule: what test/local-time-scale.test.ts checks it compresses,
 * here seen happening. It waits for three logins (about 15 s), so it runs in `npm run test:long`.
 */
describe('local broker with TIME_SCALE, on its schedule', () => {
  let config: LoadedLocalConfig;
  let broker: LocalBroker;
  const telemetry = new MemoryTelemetry();

  beforeAll(async () => {
    config = loadLocalConfig({ TIME_SCALE: String(SCALE), BROKER_PORT: '0' });
    broker = await startLocalBroker(config, { telemetry });
  });
  afterAll(async () => {
    await broker?.close();
  });

  it('logs in again on the compressed schedule and vends tokens of the compressed lifetime', async () => {
    const uat = broker.sandboxes.uat;
    const logins = () => uat?.stats().logins['uat-advisor']?.successes ?? 0;
    // A wait for the third login (about 15 s at this scale), not a timing: the deadline only bounds a hang.
    const deadline = Date.now() + 90_000;
    while (logins() < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
    expect(logins()).toBeGreaterThanOrEqual(3);

    const caller = config.callers[0];
    if (!caller) throw new Error('no local caller');
    const signer = new FunctionUrlSigner({ region: config.region, credentials: caller });
    const signed = await signer.sign({
      method: 'GET',
      url: `${broker.vendUrl}/v1/credential-sets/uat-advisor/token`,
    });
    const response = await fetch(signed.url, { headers: signed.headers });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { expiresInSeconds: number };
    expect(body.expiresInSeconds).toBeGreaterThan(0);
    expect(body.expiresInSeconds).toBeLessThanOrEqual(14_400 / SCALE);
  }, 120_000);
});
