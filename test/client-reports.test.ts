import { afterEach, describe, expect, it } from 'vitest';
import type { VendedToken } from '../client/types.js';
import {
  type BrokerWorld,
  minuteRemaining,
  reportingCaller,
  SET_ID,
  startBrokerWorld,
} from './support/client-world.js';
import { ENGINES } from './support/engines.js';

/**
 * `reportRateLimit` and `reportRejection` for a service that calls the vendor itself: its own fetch to the
 * sandbox with a token and a permit of the client, the vendor's answer handed to the client as it came. The
 * local broker over real HTTP (SigV4, the vend handler, the ledger on each engine); what the reports did is
 * judged by another consumer's permits, the ledger's count and the sandbox's logins.
 */

/** The service's own vendor call, as it would make it: Bearer token, JSON, the vendor's resource path. */
function ownCall(w: BrokerWorld, token: VendedToken, method: 'GET' | 'POST', key: string): Promise<Response> {
  return fetch(`${w.sandbox.url}/users/42/${token.tenant}/serviceKey/${key}`, {
    method,
    headers: {
      authorization: `Bearer ${token.accessToken}`,
      ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
    },
    ...(method === 'POST' ? { body: JSON.stringify({ name: key }) } : {}),
  });
}

const reports = (w: BrokerWorld) => w.callsTo('POST', '/rate-limit-reports').map((c) => c.body);
const rejections = (w: BrokerWorld) => w.callsTo('POST', '/token/rejections').map((c) => c.body);

describe.each(ENGINES)('BrokerClient reports of vendor answers the service got itself on %s', (engine) => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  it('reportRateLimit(429): a cooldown every consumer of the token sees, and this client holds its permits', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const other = w.client({ credentials: reportingCaller });
    const token = await client.getToken(SET_ID);
    (await client.acquirePermit(SET_ID, token.tokenId)).markUsed();
    w.sandbox.inject({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' });
    const answer = await ownCall(w, token, 'GET', 'limited');
    expect(answer.status).toBe(429);

    expect(await client.reportRateLimit(SET_ID, token.tokenId, answer)).toEqual({ reported: true });
    // The sandbox's 429 points at the next minute boundary (the clock starts at 09:01:01).
    expect(reports(w)).toEqual([
      { tokenId: token.tokenId, retryAfterSeconds: 59, limit: 50, remaining: 0, reset: expect.any(Number) },
    ]);
    for (const consumer of [other, client]) {
      const denied = await consumer
        .acquirePermit(SET_ID, token.tokenId, { maxWaitMs: 0 })
        .catch((e: unknown) => e);
      expect(denied).toMatchObject({ code: 'PERMIT_DEADLINE_EXCEEDED' });
      const heldSeconds = (denied as { retryAfterSeconds: number }).retryAfterSeconds;
      expect(heldSeconds).toBeGreaterThanOrEqual(59);
      expect(heldSeconds).toBeLessThanOrEqual(59 + w.set.rateLimits.marginSeconds + 1);
    }
  });

  it('reportRateLimit(2xx): X-RateLimit-Remaining below the ledger’s count caps the ledger for every consumer', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    // Someone uses the token without the broker (ten calls the ledger never counted).
    for (let i = 0; i < 10; i++) expect((await ownCall(w, token, 'GET', `elsewhere-${i}`)).status).toBe(404);
    const permit = await client.acquirePermit(SET_ID, token.tokenId);
    const answer = await ownCall(w, token, 'POST', 'own');
    permit.markUsed();
    expect(answer.status).toBe(201);
    expect(answer.headers.get('x-ratelimit-remaining')).toBe('39');
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(49);

    expect(await client.reportRateLimit(SET_ID, token.tokenId, answer)).toEqual({ reported: true });
    expect(reports(w)).toEqual([
      expect.objectContaining({
        tokenId: token.tokenId,
        limit: 50,
        remaining: 39,
        reset: expect.any(Number),
      }),
    ]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBeLessThanOrEqual(39);
    // The same headers again say nothing new: not sent twice.
    expect(await client.reportRateLimit(SET_ID, token.tokenId, answer)).toEqual({ reported: false });
    expect(reports(w)).toHaveLength(1);
  });

  it('reportRejection(TOKEN_EXPIRED): the broker re-logs in; the new token is the one cached and it works', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const old = await client.getToken(SET_ID);
    const loginsBefore = w.sandbox.stats().loginRequests;
    w.sandbox.inject({ errorCode: 'TOKEN_EXPIRED', target: 'resources' });
    const answer = await ownCall(w, old, 'GET', 'rejected');
    expect(answer.status).toBe(401);
    const body = (await answer.json()) as { errorCode: 'TOKEN_EXPIRED'; requestId?: string };

    const fresh = await client.reportRejection(SET_ID, {
      tokenId: old.tokenId,
      errorCode: body.errorCode,
      ...(body.requestId ? { requestId: body.requestId } : {}),
    });
    expect(fresh.tokenId).not.toBe(old.tokenId);
    expect(w.sandbox.stats().loginRequests).toBe(loginsBefore + 1);
    expect(rejections(w)).toEqual([
      expect.objectContaining({ tokenId: old.tokenId, errorCode: 'TOKEN_EXPIRED' }),
    ]);
    expect((await client.getToken(SET_ID)).tokenId).toBe(fresh.tokenId);
    expect((await ownCall(w, fresh, 'POST', 'after-relogin')).status).toBe(201);
  });

  it('refuses what is not a report, by name, and sends nothing', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const refused = [
      client.reportRejection(SET_ID, {
        tokenId: token.tokenId,
        errorCode: 'INVALID_CREDENTIALS' as 'TOKEN_EXPIRED',
      }),
      client.reportRejection(SET_ID, { tokenId: 'not-a-token-id', errorCode: 'TOKEN_INVALID' }),
      client.reportRateLimit(SET_ID, token.tokenId, { status: Number.NaN, headers: {} }),
      client.reportRateLimit(SET_ID, token.tokenId, { status: 429, headers: { 'bad name': '1' } }),
    ];
    for (const call of refused) {
      await expect(call).rejects.toMatchObject({
        name: 'InvalidClientRequestError',
        code: 'INVALID_CLIENT_REQUEST',
      });
    }
    // Another status is no report (and no error): a service may hand over every answer.
    expect(await client.reportRateLimit(SET_ID, token.tokenId, { status: 503, headers: {} })).toEqual({
      reported: false,
    });
    expect([...reports(w), ...rejections(w)]).toEqual([]);
  });
});
