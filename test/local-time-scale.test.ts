import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalBroker, startLocalBroker } from '../local/broker.js';
import { type LoadedLocalConfig, loadLocalConfig, scaleCredentialSet } from '../local/config.js';
import { credentialSetSchema } from '../shared/config/credential-sets.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { MemoryTelemetry } from '../shared/observability.js';

const SCALE = 1440; // 4 h tokens live 10 s; the 5-minute schedule runs every 0.2 s

// What the broker compresses, read as it starts. Its logins on the compressed schedule take real time (about 15 s):
// test/local-time-scale-schedule.test.ts, in `npm run test:long`.

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

  it('compresses the windows of reservations with the windows they are shares of, or drops them, saying so', () => {
    const reserved = config.credentialSets.find((s) => s.id === 'prod-execution');
    if (!reserved) throw new Error('the local config reserves on prod-execution');
    const set = credentialSetSchema.parse({ ...reserved, vendorBaseUrl: 'https://vendor.example' });
    // Ten times faster: minutes of 6 s, hours of 360 s; the reservation follows its windows.
    const tenfold = scaleCredentialSet(set, 10);
    expect(tenfold.rateLimits.reservations).toEqual([
      { consumer: 'portfolio-service', perWindow: { 6: 23, 360: 400 } },
    ]);
    const plan = planFor(tenfold.rateLimits);
    expect([...plan.reserved.values()].map((w) => [...w.reserved.keys()])).toEqual([
      ['portfolio-service'],
      ['portfolio-service'],
    ]);
    // At 1440 the rings of windows of milliseconds with a margin of a second would not fit the ledger item:
    // the set is served without its reservation (first come, first served), and the log says so.
    const running = broker.sets.find((s) => s.id === 'prod-execution');
    expect(running?.rateLimits.reservations).toBeUndefined();
    expect(
      telemetry.logs.find((l) => l.message.startsWith('reservations not kept at this time scale'))
        ?.attributes,
    ).toMatchObject({ credentialSet: 'prod-execution', timeScale: SCALE });
    // Nor do the unreserved sets' rings (the ledger refuses such limits): the start says so, set by set.
    const unavailable = telemetry.logs.filter((l) =>
      l.message.startsWith('permits unavailable at this time scale'),
    );
    expect(unavailable.map((l) => l.attributes?.credentialSet).sort()).toEqual(
      config.credentialSets.map((s) => s.id).sort(),
    );
  });
});
