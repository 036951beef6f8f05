import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import { PermitDeadlineError } from '../client/errors.js';
import type { SandboxSettings } from '../sandbox/index.js';
import type { CredentialSetInput } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { tokenId } from '../shared/vendor-client/token-id.js';
import { type BrokerWorld, SET_ID, startBrokerWorld, TENANT } from './support/client-world.js';
import { idealGrantTimes } from './support/ledger-harness.js';
import { propertyRuns } from './support/property-runs.js';
import { seededRandom } from './support/sandbox-http.js';

/**
 * Small soaks: 20 consumer processes (one BrokerClient each) with more demand than the quota, against the
 * sandbox in its strictest mode (sliding windows). Time is a ManualClock that moves in 100 ms steps, and only
 * while no request is on the wire, so the simulation is exact and quick.
 */
const CONSUMERS = 20;
const STEP_MS = 100;
/**
 * The one-token soak's simulated minutes: `npm test` runs the first 10 of test:long's 30 (the same world and
 * seeds, so the same run up to its end); its use is measured against what the ledger's bound allows in the time.
 */
const ONE_TOKEN_MINUTES = propertyRuns({ quick: 10, full: 30 });

interface VendorHit {
  at: number;
  tokenId: string;
  status: number;
}

interface SoakRun {
  w: BrokerWorld;
  hits: VendorHit[];
  failures: unknown[];
  served: number;
  start: number;
  end: number;
}

async function soak(options: {
  durationMs: number;
  sandbox?: Partial<SandboxSettings>;
  set?: Partial<CredentialSetInput>;
}): Promise<SoakRun> {
  const w = await startBrokerWorld({
    sandbox: { windowKind: 'sliding', ...options.sandbox },
    ...(options.set ? { set: options.set } : {}),
  });
  const hits: VendorHit[] = [];
  const failures: unknown[] = [];
  let served = 0;
  let inflight = 0;
  // Every exchange is buffered before the clock may move again.
  const tracked: typeof fetch = async (input, init) => {
    inflight++;
    try {
      const response = await w.fetch(input, init);
      const body = await response.arrayBuffer();
      if (String(input).startsWith(w.sandbox.url)) {
        const bearer = new Headers(init?.headers).get('authorization')?.slice('Bearer '.length) ?? '';
        hits.push({ at: w.clock.now(), tokenId: tokenId(bearer), status: response.status });
      }
      const empty = [204, 205, 304].includes(response.status);
      return new Response(empty ? null : body, { status: response.status, headers: response.headers });
    } finally {
      inflight--;
    }
  };
  const settle = async () => {
    for (let quiet = 0; quiet < 3; ) {
      await new Promise((resolve) => setImmediate(resolve));
      if (inflight === 0) quiet++;
      else {
        quiet = 0;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
  };
  const stop = new AbortController();
  const consume = async (client: BrokerClient, index: number) => {
    const path = `/users/${index}/${TENANT}/serviceKey/portfolio-${index}`;
    let created = false;
    while (!stop.signal.aborted) {
      try {
        await client.vendorRequest(
          SET_ID,
          created
            ? { method: 'GET', path, signal: stop.signal }
            : { method: 'POST', path, body: { index }, signal: stop.signal },
        );
        created = true;
        served++;
      } catch (error) {
        if (stop.signal.aborted) return;
        if (error instanceof PermitDeadlineError) {
          await w.clock.sleep(error.retryAfterSeconds * 1000, stop.signal).catch(() => undefined);
        } else failures.push(error);
      }
    }
  };
  const start = w.clock.now();
  const end = start + options.durationMs;
  const clients = Array.from({ length: CONSUMERS }, (_, index) =>
    w.client({ maxPermitWaitMs: 30_000, fetch: tracked, retry: { random: seededRandom(index + 1) } }),
  );
  const runs = clients.map((client, index) => consume(client, index));
  let nextScheduledRun = start + 60_000;
  while (w.clock.now() < end) {
    await settle();
    if (w.clock.now() >= nextScheduledRun) {
      await w.refresher.runScheduled();
      nextScheduledRun += 60_000;
    }
    await w.clock.advance(STEP_MS);
  }
  stop.abort();
  await settle();
  await Promise.all(runs);
  await Promise.all(clients.map((client) => client.close()));
  return { w, hits, failures, served, start, end };
}

function expectClean(run: SoakRun): void {
  expect(run.failures).toEqual([]);
  // No 429 and no 401 (nor anything else) from the vendor, ever.
  expect(run.w.sandbox.stats().errorsByCode).toEqual({});
  expect(run.hits.every((hit) => hit.status === 200 || hit.status === 201)).toBe(true);
  expect(run.served).toBe(run.hits.length);
  // Demand did exceed the quota: the ledger kept saying no.
  expect(run.w.brokerTelemetry.sum(Metric.PermitsDenied)).toBeGreaterThan(0);
}

describe('soak: 20 consumers through token rotations (lifetime 10 min, 15 min)', () => {
  let run: SoakRun;
  beforeAll(async () => {
    run = await soak({
      durationMs: 15 * 60 * 1000,
      sandbox: { tokenLifetimeSeconds: 600 },
      // The configured thresholds, not the shares of the 10-minute lifetime: rotations every few minutes.
      set: {
        refresh: {
          softThresholdSeconds: 420,
          softThresholdJitterSeconds: 0,
          hardFloorSeconds: 300,
          softThresholdLifetimeFraction: 0.9,
          softThresholdLifetimeJitterFraction: 0,
          hardFloorLifetimeFraction: 0.5,
        },
      },
    });
  }, 120_000);
  afterAll(async () => {
    await run.w.close();
  });

  it('no vendor 429, no vendor 401, no failure of any other kind', () => {
    expectClean(run);
  });

  it('every consumer moved on to each new token: at least four tokens were used', () => {
    const tokens = new Set(run.hits.map((hit) => hit.tokenId)).size;
    console.info(`soak: ${run.hits.length} vendor requests, ${tokens} tokens, all 2xx, in 15 min`);
    expect(tokens).toBeGreaterThanOrEqual(4);
  });
});

describe(`soak: 20 consumers on one token, 50 a minute (${ONE_TOKEN_MINUTES} min)`, () => {
  let run: SoakRun;
  beforeAll(async () => {
    const limits = [{ limit: 50, windowSeconds: 60 }];
    run = await soak({
      durationMs: ONE_TOKEN_MINUTES * 60 * 1000,
      sandbox: { limits },
      set: { rateLimits: { general: limits } },
    });
  }, 120_000);
  afterAll(async () => {
    await run.w.close();
  });

  it('no vendor 429, no failure', () => {
    expectClean(run);
    expect(new Set(run.hits.map((hit) => hit.tokenId)).size).toBe(1);
  });

  it('sends at least 95 % of what the ledger could ever allow in the time', () => {
    const { rateLimits } = run.w.set;
    const limits = rateLimits.general.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 }));
    const best = idealGrantTimes(limits, run.start, run.end, rateLimits.marginSeconds * 1000).length;
    const bare = idealGrantTimes(limits, run.start, run.end, 0).length;
    const sent = run.hits.filter((hit) => hit.at <= run.end).length;
    console.info(
      `soak: ${sent} vendor requests in ${ONE_TOKEN_MINUTES} min by ${CONSUMERS} consumers: ${((100 * sent) / best).toFixed(1)} % ` +
        `of the most the ledger's bound allows (${best}), ${((100 * sent) / bare).toFixed(1)} % of the bare quota (${bare})`,
    );
    expect(sent / best).toBeGreaterThanOrEqual(0.95);
  });
});
