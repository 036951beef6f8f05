import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveRegion } from '../client/aws-auth.js';
import { BrokerClient } from '../client/broker-client.js';
import { ManualClock, systemClock } from '../shared/clock.js';
import {
  type BrokerWorld,
  consumerCaller,
  REGION,
  SET_ID,
  startBrokerWorld,
  strangerCaller,
} from './support/client-world.js';

const ENV_KEYS = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'] as const;

describe('BrokerClient signing and identity', () => {
  let w: BrokerWorld;
  const saved: Record<string, string | undefined> = {};
  beforeAll(async () => {
    w = await startBrokerWorld();
    for (const key of ENV_KEYS) saved[key] = process.env[key];
  });
  afterEach(() => {
    for (const key of ENV_KEYS) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });
  afterAll(async () => {
    await w.close();
  });

  it('signs with the default AWS credential chain when no credentials are given (environment keys)', async () => {
    delete process.env.AWS_PROFILE;
    delete process.env.AWS_SESSION_TOKEN;
    process.env.AWS_ACCESS_KEY_ID = consumerCaller.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = consumerCaller.secretAccessKey;
    const client = w.client({ credentials: undefined });
    const sets = await client.listCredentialSets();
    expect(sets).toEqual([
      {
        id: SET_ID,
        environment: 'uat',
        companyRole: 'advisor',
        health: { state: expect.any(String), expiresAt: expect.any(Number), lastError: null },
      },
    ]);
    expect(sets[0]?.health.state).toBe('HEALTHY');
  });

  it('the chain picks up other keys from the environment: a principal without a rule gets 403', async () => {
    delete process.env.AWS_PROFILE;
    process.env.AWS_ACCESS_KEY_ID = strangerCaller.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = strangerCaller.secretAccessKey;
    const error = await w
      .client({ credentials: undefined })
      .getToken(SET_ID)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'BrokerApiError', code: 'INSUFFICIENT_PERMISSIONS', status: 403 });
    expect((error as { requestId?: string }).requestId).toBeTruthy();
  });

  it('a wrong secret is refused by IAM in front of the broker: FORBIDDEN, nothing reaches the handler', async () => {
    const before = w.brokerTelemetry.logs.length;
    const client = w.client({ credentials: { ...consumerCaller, secretAccessKey: 'not-the-secret' } });
    await expect(client.listCredentialSets()).rejects.toMatchObject({ code: 'FORBIDDEN', status: 403 });
    expect(w.brokerTelemetry.logs.length).toBe(before);
  });

  it('signs on the client clock: a clock 10 minutes off is refused, the injected one is accepted', async () => {
    const skewed = new ManualClock(w.clock.now() + 10 * 60 * 1000);
    await expect(w.client({ clock: skewed }).listCredentialSets()).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    await expect(w.client({ clock: systemClock }).listCredentialSets()).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    await expect(w.client().listCredentialSets()).resolves.toHaveLength(1);
  });

  it('an unreachable broker: retried with backoff on the clock, then BROKER_UNREACHABLE', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as { port: number };
        probe.close(() => resolve(free));
      });
    });
    const clock = new ManualClock(w.clock.now(), { autoAdvance: true });
    const attempts: string[] = [];
    const client = w.client({
      brokerUrl: `http://127.0.0.1:${port}`,
      clock,
      retry: { random: () => 1 },
      fetch: (input, init) => {
        attempts.push(String(input));
        return fetch(input, init);
      },
    });
    const started = clock.now();
    await expect(client.getToken(SET_ID)).rejects.toMatchObject({ code: 'BROKER_UNREACHABLE' });
    expect(attempts).toHaveLength(3);
    // Full-jitter ceilings with random() = 1: 200 then 400 ms (inclusive).
    expect(clock.now() - started).toBe(201 + 401);
  });

  it('refuses plain http:// brokers and vendors outside loopback, and names the option', () => {
    const base = { region: REGION, credentials: consumerCaller };
    expect(() => new BrokerClient({ ...base, brokerUrl: 'http://broker.example.com' })).toThrow(/brokerUrl/);
    expect(
      () =>
        new BrokerClient({
          ...base,
          brokerUrl: 'https://abc.lambda-url.eu-west-1.on.aws',
          vendorBaseUrls: { [SET_ID]: 'http://vendor.example.com' },
        }),
    ).toThrow(/vendorBaseUrls\.uat-advisor/);
    expect(() => new BrokerClient({ ...base, brokerUrl: 'https://b.example.com', maxBatchSize: 0 })).toThrow(
      /maxBatchSize/,
    );
  });

  it('finds the Region in the option, the Function URL, or AWS_REGION / AWS_DEFAULT_REGION', () => {
    const url = 'https://abcdefghij0123456789.lambda-url.eu-central-1.on.aws';
    expect(resolveRegion(undefined, url, {})).toBe('eu-central-1');
    expect(resolveRegion('us-east-2', url, {})).toBe('us-east-2');
    expect(resolveRegion(undefined, 'https://broker.internal', { AWS_REGION: 'eu-west-1' })).toBe(
      'eu-west-1',
    );
    expect(resolveRegion(undefined, 'https://broker.internal', { AWS_DEFAULT_REGION: 'ap-south-1' })).toBe(
      'ap-south-1',
    );
    expect(() => resolveRegion(undefined, 'https://broker.internal', {})).toThrow(/region/);
    expect(() => resolveRegion('not a region', 'https://broker.internal', {})).toThrow(/region/);
  });
});
