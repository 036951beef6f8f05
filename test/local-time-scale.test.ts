import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { type LocalBroker, startLocalBroker } from '../local/broker.js';
import { type LoadedLocalConfig, loadLocalConfig, scaleCredentialSet } from '../local/config.js';
import { MemoryTelemetry } from '../shared/observability.js';

const SCALE = 1440; // 4 h tokens live 10 s; the 5-minute schedule runs every 0.2 s

describe('local broker with TIME_SCALE', () => {
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

  it('compresses every broker threshold and window, but not the latency-bound margins', () => {
    const set = broker.sets.find((s) => s.id === 'uat-advisor');
    expect(set?.refresh.softThresholdSeconds).toBe(3600 / SCALE);
    expect(set?.refresh.hardFloorSeconds).toBe(300 / SCALE);
    expect(set?.rateLimits.general).toEqual([
      { limit: 50, windowSeconds: 60 / SCALE },
      { limit: 1000, windowSeconds: 3600 / SCALE },
    ]);
    expect(set?.rateLimits.marginSeconds).toBe(1);
    expect(set?.rateLimits.permitValiditySeconds).toBeLessThanOrEqual(1);
    const unscaled = config.credentialSets[0];
    expect(
      unscaled && scaleCredentialSet({ ...unscaled, vendorBaseUrl: 'https://vendor.example' }, 1),
    ).toEqual({
      ...unscaled,
      vendorBaseUrl: 'https://vendor.example',
    });
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
