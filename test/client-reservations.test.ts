import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import type { VendedToken } from '../client/types.js';
import {
  type BrokerWorld,
  drivenClient,
  reportingCaller,
  SET_ID,
  startBrokerWorld,
} from './support/client-world.js';
import { ENGINES } from './support/engines.js';
import { enginesTakingTurns } from './support/property-runs.js';

/**
 * Permit batches on a set whose reservations leave less shared than a batch can grow to (8 by default): 50 a
 * minute, 43 of them reserved for 'portfolio', so 'reporting' (no reservation) can have at most the shared 7 in
 * one grant, and 'portfolio' its 43 plus the shared 7. Over the real vend path (SigV4, the vend handler, the
 * ledger on each engine) and the vendor sandbox.
 */
const RESERVED = 43;
const SHARED = 50 - RESERVED;
const set = { rateLimits: { reservations: [{ consumer: 'portfolio', perWindow: { 60: RESERVED } }] } };
const resource = (key: string) => (token: VendedToken) => `/users/42/${token.tenant}/serviceKey/${key}`;

/** `n` vendor calls one after the other (a create, then reads): each one's status, or its error's code. */
async function manyCalls(client: BrokerClient, n: number): Promise<(number | string)[]> {
  const outcomes: (number | string)[] = [];
  for (let i = 0; i < n; i++) {
    const request =
      i === 0 ? ({ method: 'POST', body: { name: 'r' } } as const) : ({ method: 'GET' } as const);
    outcomes.push(
      await client.vendorRequest(SET_ID, { ...request, path: resource('reporting') }).then(
        (r) => r.status,
        (e: unknown) => (e as { code?: string }).code ?? String(e),
      ),
    );
  }
  return outcomes;
}
const allSucceeded = (n: number) => [201, ...Array.from({ length: n - 1 }, () => 200)];

/**
 * A broker that sends neither `available` nor `maxCount` in its permit answers (release N-1), or (`in400`) one
 * that says `maxCount` only in its 400: as a pool that grew before a reservation was configured meets it.
 */
function olderBroker(w: BrokerWorld, in400: boolean): typeof fetch {
  return async (input, init) => {
    const response = await w.fetch(input, init);
    const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
    if (!url.endsWith('/permits')) return response;
    const body = (await response.json()) as Record<string, unknown> & { details?: Record<string, unknown> };
    delete body.available;
    delete body.maxCount;
    if (body.details && !(in400 && response.status === 400)) {
      delete body.details.available;
      delete body.details.maxCount;
    }
    const headers = new Headers(response.headers);
    headers.delete('content-length');
    return new Response(JSON.stringify(body), { status: response.status, headers });
  };
}

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on dynalite,
// test:long on DynamoDB Local (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 0);

describe.each(IN_TURN)('BrokerClient batches with reservations on %s', (engine) => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  const asks = () => w.callsTo('POST', '/permits').map((c) => c.body.count as number);

  it('a consumer without a reservation makes many calls and none fails: no batch beyond the shared part', async () => {
    w = await startBrokerWorld({ set, engine });
    // Long enough to wait out a window once the shared part is used up: only a 4xx could fail a call.
    const { client, drive } = drivenClient(w, { credentials: reportingCaller, maxPermitWaitMs: 180_000 });
    expect(await drive(manyCalls(client, 30))).toEqual(allSucceeded(30));
    expect(w.sandbox.stats().responsesByStatus).toEqual({ '201': 1, '200': 29 });
    // Batched up to the shared part, never beyond (a larger ask is a 400): 7 a window, asked as 1, 2, 4, then
    // one to hear when room comes back (denied), and what the answers say is left of the shared part.
    expect(asks().slice(0, 6)).toEqual([1, 2, 4, 1, 1, SHARED - 1]);
    expect(Math.max(...asks())).toBeLessThanOrEqual(SHARED);
  });

  it("the reserved consumer's batches grow within its reservation plus the shared part", async () => {
    w = await startBrokerWorld({ set, engine });
    const { client, drive } = drivenClient(w);
    const token = await client.getToken(SET_ID);
    await drive(
      (async () => {
        for (let i = 0; i < 50; i++) await client.acquirePermit(SET_ID, token.tokenId);
      })(),
    );
    // Past the shared 7 (8 is the client's largest batch), the last ask what is left of its 43 + 7: no denial.
    expect(asks()).toEqual([1, 2, 4, 8, 8, 8, 8, 8, 3]);
    await expect(client.acquirePermit(SET_ID, token.tokenId, { maxWaitMs: 0 })).rejects.toMatchObject({
      code: 'PERMIT_DEADLINE_EXCEEDED',
    });
  });

  it.each([
    ['a broker that says maxCount only in the 400: shrinks to it', true, SHARED],
    ['a broker that does not say maxCount (release N-1): halves the batch', false, 4],
  ])('a 400 for a batch too large never fails a call; %s', async (_, in400, shrunk) => {
    w = await startBrokerWorld({ set, engine });
    const { client, drive } = drivenClient(
      w,
      { credentials: reportingCaller, maxPermitWaitMs: 180_000 },
      olderBroker(w, in400),
    );
    expect(await drive(manyCalls(client, 30))).toEqual(allSucceeded(30));
    // The batch grew to 8 once (before it knew better), was refused, and never went past `shrunk` again.
    const counts = asks();
    expect(counts.slice(0, 5)).toEqual([1, 2, 4, 8, shrunk]);
    expect(counts.filter((count) => count > SHARED)).toEqual([8]);
    expect(Math.max(...counts.slice(4))).toBe(shrunk);
  });
});
