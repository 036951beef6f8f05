import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import {
  type BrokerWorld,
  eventually,
  minuteRemaining,
  SET_ID,
  startBrokerWorld,
  TENANT,
} from './support/client-world.js';
import { whileAdvancing } from './support/refresher-harness.js';

const grants = (w: BrokerWorld) => w.callsTo('POST', '/permits').map((c) => c.body.count as number);
const returns = (w: BrokerWorld) => w.callsTo('POST', '/permits/returns').map((c) => c.body);

/** n permits, each sent at once (marked used: a held one would hold its batch's give-back until it ends). */
async function take(client: BrokerClient, tokenId: string, n: number, cls?: string) {
  const permits = [];
  for (let i = 0; i < n; i++) {
    const permit = await client.acquirePermit(SET_ID, tokenId, cls ? { class: cls } : {});
    permit.markUsed();
    permits.push(permit);
  }
  return permits;
}

describe('BrokerClient permits: adaptive batches and give-back', () => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  it('starts at 1 and doubles up to 8 while permits run out before they lapse', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const permits = await take(client, token.tokenId, 23);
    expect(grants(w)).toEqual([1, 2, 4, 8, 8]);
    for (const permit of permits) {
      expect(permit.tokenId).toBe(token.tokenId);
      expect(permit.validUntil).toBeGreaterThan(w.clock.now() + 500);
    }
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 23);
  });

  it('serves concurrent callers from shared grants, one grant in flight at a time', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const permits = await Promise.all(
      Array.from({ length: 30 }, () => client.acquirePermit(SET_ID, token.tokenId)),
    );
    expect(permits).toHaveLength(30);
    expect(grants(w)).toEqual([1, 2, 4, 8, 8, 8]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 31);
  });

  it('gives unused permits back just before they lapse (the ledger has them again) and shrinks the batch', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    await take(client, token.tokenId, 8); // batches 1, 2, 4 and one of 8
    expect(grants(w)).toEqual([1, 2, 4, 8]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 15);
    const lastGrant = w.callsTo('POST', '/permits').length;
    expect(returns(w)).toHaveLength(0);

    await w.clock.advance(w.set.rateLimits.permitValiditySeconds * 1000);
    await eventually(() => returns(w).length === 1);
    expect(returns(w)[0]).toMatchObject({
      tokenId: token.tokenId,
      count: 7,
      receipt: expect.stringMatching(/^r1\./),
    });
    await eventually(async () => minuteRemaining(await w.remaining(token.tokenId)) === 50 - 8);

    await client.acquirePermit(SET_ID, token.tokenId);
    expect(grants(w).slice(lastGrant)).toEqual([4]);
  });

  it('close() gives every unused permit back before it resolves, then refuses permits', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    await take(client, token.tokenId, 8);
    await client.close();
    expect(returns(w)).toEqual([expect.objectContaining({ tokenId: token.tokenId, count: 7 })]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 8);
    await expect(client.acquirePermit(SET_ID, token.tokenId)).rejects.toMatchObject({
      code: 'CLIENT_CLOSED',
    });
  });

  it('close() during a grant: the waiter is told, and the permits that land are given back', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    await take(client, token.tokenId, 1); // the next grant is for 2
    const waiting = client.acquirePermit(SET_ID, token.tokenId).catch((e: unknown) => e);
    await client.close();
    expect(await waiting).toMatchObject({ code: 'CLIENT_CLOSED' });
    expect(grants(w)).toEqual([1, 2]);
    expect(returns(w)).toEqual([expect.objectContaining({ count: 2 })]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(49);
  });

  it('gives the old token permits back when the token changes', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const old = await client.getToken(SET_ID);
    await take(client, old.tokenId, 8); // 7 left in hand
    w.sandbox.inject({ errorCode: 'TOKEN_EXPIRED', target: 'resources' });
    const response = await client.vendorRequest(SET_ID, {
      method: 'POST',
      path: `/users/7/${TENANT}/serviceKey/after-rotation`,
      body: { name: 'x' },
    });
    expect(response.status).toBe(201);
    const fresh = await client.getToken(SET_ID);
    expect(fresh.tokenId).not.toBe(old.tokenId);
    // The 401 call used one more of the old token's permits; the other 6 went back.
    await eventually(() => returns(w).length === 1);
    expect(returns(w)[0]).toMatchObject({ tokenId: old.tokenId, count: 6 });
    await eventually(async () => minuteRemaining(await w.remaining(old.tokenId)) === 50 - 9);
  });

  describe('with a small quota (5 a minute; class "reports": 2 a minute)', () => {
    const set = {
      rateLimits: {
        general: [
          { limit: 5, windowSeconds: 60 },
          { limit: 1000, windowSeconds: 3600 },
        ],
        classes: { reports: [{ limit: 2, windowSeconds: 60 }] },
      },
    };

    it('never asks for more than the ledger said remains', async () => {
      w = await startBrokerWorld({ set });
      const client = w.client();
      const token = await client.getToken(SET_ID);
      await take(client, token.tokenId, 5);
      expect(grants(w)).toEqual([1, 2, 2]);
    });

    it('a denial fails fast when room comes after the deadline, and is waited out on the clock otherwise', async () => {
      w = await startBrokerWorld({ set });
      const client = w.client({ retry: { random: () => 0 } });
      const token = await client.getToken(SET_ID);
      await take(client, token.tokenId, 5);
      const started = w.clock.now();
      const early = await client
        .acquirePermit(SET_ID, token.tokenId, { maxWaitMs: 1000 })
        .catch((e: unknown) => e);
      expect(early).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
      const retryAfterSeconds = (early as { retryAfterSeconds: number }).retryAfterSeconds;
      // 60 s window plus the ledger margin.
      expect(retryAfterSeconds).toBeGreaterThanOrEqual(60);
      expect(retryAfterSeconds).toBeLessThanOrEqual(66);
      expect(w.clock.now()).toBe(started);

      const permit = await whileAdvancing(
        w.clock,
        client.acquirePermit(SET_ID, token.tokenId, { maxWaitMs: 120_000 }),
        1000,
        2,
      );
      expect(w.clock.now() - started).toBeGreaterThanOrEqual((retryAfterSeconds - 1) * 1000);
      expect(permit.grantedAt).toBeGreaterThanOrEqual(started + 60_000);
      const denials = w.brokerTelemetry.metrics.filter((m) => m.name === 'PermitsDenied');
      // One denial per wait, not one per waiting caller per tick.
      expect(denials.length).toBeLessThanOrEqual(3);
    });

    it('class permits count against their class: the class runs out while general permits go on', async () => {
      w = await startBrokerWorld({ set });
      const client = w.client();
      const token = await client.getToken(SET_ID);
      const reports = await take(client, token.tokenId, 2, 'reports');
      expect(reports.every((p) => p.class === 'reports')).toBe(true);
      await expect(
        client.acquirePermit(SET_ID, token.tokenId, { class: 'reports', maxWaitMs: 0 }),
      ).rejects.toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
      await take(client, token.tokenId, 3);
      expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(0);
    });

    it('an abort stops the wait at once', async () => {
      w = await startBrokerWorld({ set });
      const client = w.client();
      const token = await client.getToken(SET_ID);
      await take(client, token.tokenId, 5);
      const controller = new AbortController();
      const waiting = client
        .acquirePermit(SET_ID, token.tokenId, { signal: controller.signal, maxWaitMs: 120_000 })
        .catch((e: unknown) => e);
      await eventually(() => w.clock.pendingSleepers > 0);
      controller.abort();
      expect(await waiting).toMatchObject({ code: 'REQUEST_ABORTED' });
    });
  });
});
