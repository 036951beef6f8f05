import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import type { PermitPriority } from '../client/types.js';
import {
  type BrokerWorld,
  drivenClient,
  eventually,
  SET_ID,
  startBrokerWorld,
  TENANT,
} from './support/client-world.js';

/**
 * Priorities within one BrokerClient: with the quota used up, waiting interactive callers are served before
 * any waiting batch caller, each class first come first served; a caller that gives up leaves no trace in
 * the queue. Real broker (vend handler over HTTP, dynalite ledger), ManualClock: the clock moves only while
 * no broker request of the client is on its way, so a grant never ages on the way and the order is the
 * queue's, not the machine's.
 */

// 5 a minute; permits usable for 15 s (the ledger wants a fifth of the margin as slack), so a grant is
// never lapsed by the time its waiter runs.
const set = {
  rateLimits: {
    general: [
      { limit: 5, windowSeconds: 60 },
      { limit: 1000, windowSeconds: 3600 },
    ],
    marginSeconds: 20,
    permitValiditySeconds: 15,
  },
};

const grants = (w: BrokerWorld) => w.callsTo('POST', '/permits');

async function useUpTheMinute(client: BrokerClient): Promise<string> {
  const token = await client.getToken(SET_ID);
  for (let i = 0; i < 5; i++) await client.acquirePermit(SET_ID, token.tokenId);
  return token.tokenId;
}

describe('BrokerClient priorities: interactive calls before batch calls in one process', () => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  it('with the quota used up, every waiting interactive call is served before any batch call, each in its order', async () => {
    w = await startBrokerWorld({ set });
    const { client, drive } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const served: string[] = [];
    const wait = (name: string, priority: PermitPriority) =>
      client.acquirePermit(SET_ID, tokenId, { priority, maxWaitMs: 600_000 }).then(() => {
        served.push(name);
      });
    // Arriving mixed, batch first.
    const waiting = [
      wait('b0', 'batch'),
      wait('i0', 'interactive'),
      wait('b1', 'batch'),
      wait('i1', 'interactive'),
      wait('b2', 'batch'),
      wait('i2', 'interactive'),
      wait('b3', 'batch'),
    ];
    // All of them wait out the denial; one more interactive call comes while they do.
    await eventually(() => w.clock.pendingSleepers >= 7);
    waiting.push(wait('i3', 'interactive'));
    await drive(Promise.all(waiting));
    expect(served).toEqual(['i0', 'i1', 'i2', 'i3', 'b0', 'b1', 'b2', 'b3']);
    // Priority stays in the process: the broker is asked exactly as before (no new field on the wire).
    for (const call of grants(w)) expect(Object.keys(call.body).sort()).toEqual(['count', 'tokenId']);
  });

  it('batch calls are served in their order when no interactive call waits (not starved)', async () => {
    w = await startBrokerWorld({ set });
    const { client, drive } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const served: number[] = [];
    const waiting = [0, 1, 2, 3, 4, 5].map((n) =>
      client.acquirePermit(SET_ID, tokenId, { priority: 'batch', maxWaitMs: 600_000 }).then(() => {
        served.push(n);
      }),
    );
    await drive(Promise.all(waiting));
    expect(served).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('an aborted batch waiter and a timed-out interactive waiter leave the queue: the others are served as if they never came', async () => {
    w = await startBrokerWorld({ set });
    const { client, drive } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const served: string[] = [];
    const controller = new AbortController();
    const aborted = client
      .acquirePermit(SET_ID, tokenId, { priority: 'batch', signal: controller.signal, maxWaitMs: 600_000 })
      .catch((e: unknown) => e);
    const i0 = client.acquirePermit(SET_ID, tokenId, { maxWaitMs: 600_000 }).then(() => served.push('i0'));
    const b1 = client
      .acquirePermit(SET_ID, tokenId, { priority: 'batch', maxWaitMs: 600_000 })
      .then(() => served.push('b1'));
    await eventually(() => w.clock.pendingSleepers >= 3);
    // Room comes in about a minute: an interactive caller that cannot wait that long is told at once.
    const hasty = await client.acquirePermit(SET_ID, tokenId, { maxWaitMs: 1000 }).catch((e: unknown) => e);
    expect(hasty).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
    controller.abort();
    expect(await aborted).toMatchObject({ code: 'REQUEST_ABORTED' });
    // Neither left a place in the queue behind: b1 is next after i0, not stuck behind a ghost.
    await drive(Promise.all([i0, b1]));
    expect(served).toEqual(['i0', 'b1']);
  });

  it('a batch waiter whose deadline passes while interactive calls take the room fails with PermitDeadlineError; the next batch caller is served', async () => {
    w = await startBrokerWorld({ set });
    const { client, drive } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const served: string[] = [];
    // First in line, but batch: room for 5 comes in about a minute (within its 90 s), and the five
    // interactive calls that came after it take all of it.
    const late = client
      .acquirePermit(SET_ID, tokenId, { priority: 'batch', maxWaitMs: 90_000 })
      .catch((e: unknown) => e);
    const interactive = [0, 1, 2, 3, 4].map((n) =>
      client.acquirePermit(SET_ID, tokenId, { maxWaitMs: 600_000 }).then(() => served.push(`i${n}`)),
    );
    const patient = client
      .acquirePermit(SET_ID, tokenId, { priority: 'batch', maxWaitMs: 600_000 })
      .then(() => served.push('b1'));
    const error = await drive(late);
    expect(error).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
    expect((error as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await drive(Promise.all([...interactive, patient]));
    expect(served).toEqual(['i0', 'i1', 'i2', 'i3', 'i4', 'b1']);
  });

  it('an interactive waiter whose deadline passes while earlier interactive calls take the room fails; the batch caller behind it is served', async () => {
    w = await startBrokerWorld({ set });
    const { client, drive } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const served: string[] = [];
    const interactive = [0, 1, 2, 3, 4].map((n) =>
      client.acquirePermit(SET_ID, tokenId, { maxWaitMs: 600_000 }).then(() => served.push(`i${n}`)),
    );
    const late = client.acquirePermit(SET_ID, tokenId, { maxWaitMs: 90_000 }).catch((e: unknown) => e);
    const batch = client
      .acquirePermit(SET_ID, tokenId, { priority: 'batch', maxWaitMs: 600_000 })
      .then(() => served.push('b0'));
    expect(await drive(late)).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
    // Had it stayed in the queue, the batch caller would wait behind it for ever.
    await drive(Promise.all([...interactive, batch]));
    expect(served).toEqual(['i0', 'i1', 'i2', 'i3', 'i4', 'b0']);
  });

  it('vendorRequest takes its permits with the priority it is given', async () => {
    w = await startBrokerWorld({ set });
    const sent: string[] = [];
    const recordVendor: typeof globalThis.fetch = (input, init) => {
      const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
      if (url.origin === w.sandbox.url) sent.push(url.pathname.split('/').at(-1) ?? '');
      return w.fetch(input, init);
    };
    const { client, drive } = drivenClient(w, {}, recordVendor);
    await useUpTheMinute(client);
    const request = (key: string, priority?: PermitPriority) =>
      client.vendorRequest(SET_ID, {
        method: 'GET',
        path: `/users/1/${TENANT}/serviceKey/${key}`,
        maxPermitWaitMs: 600_000,
        ...(priority ? { priority } : {}),
      });
    const report = request('report', 'batch').catch((e: unknown) => e);
    const user = request('user').catch((e: unknown) => e);
    await drive(Promise.all([report, user]));
    // 404s from the vendor (nothing stored under these keys): sent, in the order of the permits.
    expect(sent).toEqual(['user', 'report']);
  });

  it('defaults unchanged: no priority is interactive, a lone batch caller gets the same batches, a wrong priority is refused', async () => {
    w = await startBrokerWorld();
    const client = w.client();
    const token = await client.getToken(SET_ID);
    for (let i = 0; i < 7; i++) await client.acquirePermit(SET_ID, token.tokenId);
    for (let i = 0; i < 16; i++) await client.acquirePermit(SET_ID, token.tokenId, { priority: 'batch' });
    expect(grants(w).map((c) => c.body.count)).toEqual([1, 2, 4, 8, 8]);
    await expect(
      client.acquirePermit(SET_ID, token.tokenId, { priority: 'urgent' as PermitPriority }),
    ).rejects.toMatchObject({ code: 'INVALID_CLIENT_REQUEST' });
    await expect(
      client.vendorRequest(SET_ID, {
        method: 'GET',
        path: `/users/1/${TENANT}/serviceKey/x`,
        priority: 'low' as PermitPriority,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_CLIENT_REQUEST' });
    expect(grants(w)).toHaveLength(5);
  });

  it('close() ends the waits of both priorities at once', async () => {
    w = await startBrokerWorld({ set });
    const { client } = drivenClient(w);
    const tokenId = await useUpTheMinute(client);
    const waits = (['batch', 'interactive', 'batch'] as const).map((priority) =>
      client.acquirePermit(SET_ID, tokenId, { priority, maxWaitMs: 600_000 }).catch((e: unknown) => e),
    );
    await eventually(() => w.clock.pendingSleepers >= 3);
    await client.close();
    for (const result of await Promise.all(waits)) expect(result).toMatchObject({ code: 'CLIENT_CLOSED' });
    expect(w.clock.pendingSleepers).toBe(0);
  });
});
