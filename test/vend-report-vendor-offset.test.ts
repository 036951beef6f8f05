import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setKey } from '../shared/aws/keys.js';
import type { VendorFeedbackReport } from '../shared/ledger/index.js';
import { MAX_VENDOR_OFFSET_MS } from '../shared/ledger/validation.js';
import { LOGIN_ROUND_TRIP_ALLOWANCE_MS, vendorOffsetOf } from '../shared/tokens/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import {
  fixture,
  getToken,
  parseBody,
  startVendHarness,
  type TokenBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';

/**
 * The report route's wiring: every rate-limit report reaches the ledger with the reported token's vendor clock
 * offset, the live token's as the table holds it (measured at its login), whatever release wrote it. The harness
 * runs on one ManualClock without a DynamoDB reference, so the ledger's clock is the harness clock, and the
 * sandbox's `clockOffsetSeconds` is the truth. What the ledger does with the offset is not asserted here: a spy
 * around the real ledger records what the route gave it.
 */
describe.each(ENGINES)('rate-limit reports on %s carry the token’s vendor clock offset', (engine) => {
  let dynamo: LocalDynamo;
  let h: VendHarness | undefined;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    await dynamo.close();
  });
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** The reports the route hands the ledger, as handed: the real ledger still applies each. */
  function recordReports(harness: VendHarness): VendorFeedbackReport[] {
    const seen: VendorFeedbackReport[] = [];
    const real = harness.ledger.reportVendorFeedback.bind(harness.ledger);
    harness.ledger.reportVendorFeedback = (report) => {
      seen.push(structuredClone(report));
      return real(report);
    };
    return seen;
  }

  const report = (harness: VendHarness, body: unknown) =>
    harness.invoke(withChanges(fixture('report-rate-limit'), { body }));

  /** A started harness whose sandbox runs `vendorOffsetSeconds` off the ledger's clock, with a token vended. */
  async function vended(vendorOffsetSeconds: number, maxClockSkewSeconds?: number) {
    const harness = await startVendHarness(dynamo, {
      sandbox: { clockOffsetSeconds: vendorOffsetSeconds },
      ...(maxClockSkewSeconds === undefined ? {} : { setOverrides: { refresh: { maxClockSkewSeconds } } }),
    });
    h = harness;
    const seen = recordReports(harness);
    const { tokenId } = parseBody<TokenBody>(await getToken(harness));
    return { harness, seen, tokenId };
  }

  it('passes the live token’s interval as stored at its login; the sandbox’s +120 s is inside it', async () => {
    const { harness, seen, tokenId } = await vended(120);
    const stored = (await harness.tokenStore.read('uat-advisor', harness.clock.now()))?.current;
    expect(stored?.tokenId).toBe(tokenId);
    expect(stored?.vendorOffsetMs).toBeDefined();
    // A window resetting 30 s from now on the vendor's clock, and a 429 with Retry-After: both reports carry it.
    const reset = Math.floor(harness.clock.now() / 1000) + 120 + 30;
    expect((await report(harness, { tokenId, limit: 1000, remaining: 10, reset })).statusCode).toBe(204);
    expect((await report(harness, { tokenId, retryAfterSeconds: 5 })).statusCode).toBe(204);
    expect(seen).toHaveLength(2);
    for (const handed of seen) {
      expect(handed.vendorOffsetMs).toEqual(stored?.vendorOffsetMs);
      expect(handed.vendorOffsetMs?.lo).toBeLessThanOrEqual(120_000);
      expect(handed.vendorOffsetMs?.hi).toBeGreaterThanOrEqual(120_000);
    }
    expect(seen[0]).toMatchObject({ limit: 1000, remaining: 10, reset, setId: 'uat-advisor' });
  });

  it('passes the fallback for a token written without the field (as release N-1 writes it)', async () => {
    const { harness, seen, tokenId } = await vended(-30);
    // The item as N-1 would have written it: the same token, no interval (a new version, as any write makes).
    await harness.dynamo.client.send(
      new UpdateItemCommand({
        TableName: harness.tokensTable,
        Key: setKey('uat-advisor'),
        UpdateExpression: 'REMOVE #current.#offset SET #version = #version + :one',
        ExpressionAttributeNames: {
          '#current': 'current',
          '#offset': 'vendorOffsetMs',
          '#version': 'version',
        },
        ExpressionAttributeValues: { ':one': { N: '1' } },
      }),
    );
    // Past the warm cache's version check: the route reads the token as the table now holds it.
    await harness.clock.advance(2_000);
    const stored = (await harness.tokenStore.read('uat-advisor', harness.clock.now()))?.current;
    expect(stored?.tokenId).toBe(tokenId);
    expect(stored?.vendorOffsetMs).toBeUndefined();
    expect((await report(harness, { tokenId, retryAfterSeconds: 5 })).statusCode).toBe(204);
    expect(seen).toHaveLength(1);
    const handed = seen[0]?.vendorOffsetMs;
    expect(handed).toEqual(vendorOffsetOf({ vendorClockSkewSeconds: stored?.vendorClockSkewSeconds }));
    // From the skew alone: the Date's second and the longest round trip wider, the truth still inside.
    expect(handed?.lo).toBeLessThanOrEqual(-30_000);
    expect(handed?.hi).toBeGreaterThanOrEqual(-30_000);
    expect((handed?.hi ?? 0) - (handed?.lo ?? 0)).toBeGreaterThanOrEqual(
      1000 + LOGIN_ROUND_TRIP_ALLOWANCE_MS,
    );
  });

  it('leaves out an offset beyond what the ledger accepts (a set allowing 20 min), says so, and still reports', async () => {
    const { harness, seen, tokenId } = await vended(1000, 1200);
    const stored = (await harness.tokenStore.read('uat-advisor', harness.clock.now()))?.current;
    expect(stored?.vendorOffsetMs?.lo).toBeGreaterThan(MAX_VENDOR_OFFSET_MS);
    expect((await report(harness, { tokenId, retryAfterSeconds: 5 })).statusCode).toBe(204);
    expect(seen).toHaveLength(1);
    expect(seen[0]).not.toHaveProperty('vendorOffsetMs');
    expect(seen[0]).toMatchObject({ retryAfterSeconds: 5 });
    const warned = harness.telemetry.logs.filter((l) => l.message.startsWith('vendor clock offset beyond'));
    expect(warned.map((l) => l.attributes)).toEqual([
      { credentialSetId: 'uat-advisor', tokenId, vendorOffsetMs: stored?.vendorOffsetMs },
    ]);
  });

  it('a consumer cannot send one: 400, and nothing reaches the ledger', async () => {
    const { harness, seen, tokenId } = await vended(0);
    const refused = await report(harness, {
      tokenId,
      retryAfterSeconds: 5,
      vendorOffsetMs: { lo: -900_000, hi: -899_000 },
    });
    expect(refused.statusCode).toBe(400);
    expect(seen).toHaveLength(0);
  });
});
