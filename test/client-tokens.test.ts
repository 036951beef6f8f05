import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tokenId } from '../shared/vendor-client/token-id.js';
import { type BrokerWorld, SET_ID, startBrokerWorld, TENANT } from './support/client-world.js';
import { expectNoSecrets, sandboxPasswords } from './support/refresher-harness.js';
import { seededRandom } from './support/sandbox-http.js';

describe('BrokerClient tokens', () => {
  let w: BrokerWorld;
  beforeEach(async () => {
    w = await startBrokerWorld();
  });
  afterEach(async () => {
    await w.close();
  });

  const tokenRequests = () => w.callsTo('GET', `/credential-sets/${SET_ID}/token`);

  it('vends the set token with its login fields, and hides the token from logs and serialisation', async () => {
    const client = w.client();
    const token = await client.getToken(SET_ID);
    expect(token.credentialSet).toBe(SET_ID);
    expect(token.environment).toBe('uat');
    expect(token.tenant).toBe(TENANT);
    expect(token.companyKey).toBe('CMP-UAT-ADVISOR');
    expect(token.userKey).toBe('USR-UAT-ADV-0001');
    expect(token.tokenId).toBe(tokenId(token.accessToken));
    expect(token.expiresAt * 1000 - w.clock.now()).toBe(4 * 3600 * 1000 - 61_000);
    // One second less than exp says: the vendor's Date has whole seconds: the broker takes its clock as far ahead as that allows.
    expect(token.expiresInSeconds).toBe(4 * 3600 - 61 - 1);
    // The earlier of exp and the broker's expiresInSeconds from the answer: here the latter.
    expect(token.expiresAtMs).toBe(token.expiresAt * 1000 - 1000);
    expect(token.quota?.find((q) => q.windowSeconds === 60)?.remaining).toBe(50);
    expect(token.accessToken.split('.')).toHaveLength(3);
    expectNoSecrets(`${JSON.stringify(token)} ${inspect(token)} ${JSON.stringify({ ...token })}`, []);
    expect(JSON.stringify(token)).toContain(token.tokenId);
  });

  it('serves the cached token from memory: one vend request for many calls', async () => {
    const client = w.client();
    const first = await client.getToken(SET_ID);
    for (let i = 0; i < 5; i++) expect((await client.getToken(SET_ID)).tokenId).toBe(first.tokenId);
    await w.clock.advance(3600 * 1000);
    expect((await client.getToken(SET_ID)).tokenId).toBe(first.tokenId);
    expect(tokenRequests()).toHaveLength(1);
  });

  it('shares one vend request between concurrent callers (single-flight)', async () => {
    const client = w.client();
    const tokens = await Promise.all(Array.from({ length: 25 }, () => client.getToken(SET_ID)));
    expect(new Set(tokens.map((t) => t.tokenId)).size).toBe(1);
    expect(tokenRequests()).toHaveLength(1);
  });

  it('keeps the token until expiresAt − 300 s − margin, then takes the broker current one', async () => {
    const client = w.client({ tokenMarginSeconds: 60, tokenSwitchSpreadSeconds: 0 });
    const first = await client.getToken(SET_ID);
    // The refresher re-logs in at its soft threshold (a fifth of the 4 h lifetime or a little less before exp,
    // so by 45 minutes before): the broker now has a newer one.
    await w.clock.advance((3 * 3600 + 900) * 1000);
    const run = await w.refresher.runScheduled();
    expect(run.sets[0]?.action).toBe('LOGGED_IN');
    const second = run.sets[0]?.tokenId;
    expect(second).not.toBe(first.tokenId);
    // The consumer keeps its token while it has more than 300 + 60 s left...
    w.clock.set(first.expiresAt * 1000 - 361_000);
    expect((await client.getToken(SET_ID)).tokenId).toBe(first.tokenId);
    expect(tokenRequests()).toHaveLength(1);
    // ...and asks the broker once it has less.
    w.clock.set(first.expiresAt * 1000 - 359_000);
    expect((await client.getToken(SET_ID)).tokenId).toBe(second);
    expect((await client.getToken(SET_ID)).tokenId).toBe(second);
    expect(tokenRequests()).toHaveLength(2);
  });

  it('spreads the switch-over: each client leaves the token at its own time, never inside floor + margin', async () => {
    const [marginS, spreadS] = [60, 120];
    const clients = [21, 22, 23, 24, 25].map((seed) =>
      w.client({
        tokenMarginSeconds: marginS,
        tokenSwitchSpreadSeconds: spreadS,
        retry: { random: seededRandom(seed) },
      }),
    );
    const first = await clients[0]?.getToken(SET_ID);
    if (!first) throw new Error('no token');
    for (const client of clients) expect((await client.getToken(SET_ID)).tokenId).toBe(first.tokenId);
    // Inside the token's own soft threshold (a fifth of its 4 h life), so the scheduled run re-logs in.
    await w.clock.advance(3.3 * 3600 * 1000);
    const run = await w.refresher.runScheduled();
    const second = run.sets[0]?.tokenId;
    expect(second).not.toBe(first.tokenId);
    const expiresMs = first.expiresAt * 1000;
    const switchedAt: (number | undefined)[] = clients.map(() => undefined);
    // Every 100 ms from before the earliest allowed switch-over to past the latest one.
    for (let t = expiresMs - (300 + marginS + spreadS + 1) * 1000; t <= expiresMs - 359_000; t += 100) {
      w.clock.set(t);
      for (const [i, client] of clients.entries()) {
        const token = await client.getToken(SET_ID);
        if (token.tokenId === first.tokenId) {
          // Still the old token: never with less than the floor plus the margin left, never after a switch.
          expect(expiresMs - t).toBeGreaterThanOrEqual((300 + marginS) * 1000);
          expect(switchedAt[i]).toBeUndefined();
        } else {
          expect(token.tokenId).toBe(second);
          switchedAt[i] ??= t;
        }
      }
    }
    for (const at of switchedAt) {
      expect(at).toBeGreaterThan(expiresMs - (300 + marginS + spreadS + 1) * 1000);
      expect(at).toBeLessThanOrEqual(expiresMs - (300 + marginS) * 1000 + 100);
    }
    // Each client asked the broker once for the new token, each at its own time.
    expect(new Set(switchedAt).size).toBe(clients.length);
    expect(tokenRequests()).toHaveLength(2 * clients.length);
  });

  it('passes minValiditySeconds through: the broker re-logs in when the token has less', async () => {
    const client = w.client();
    const first = await client.getToken(SET_ID);
    const loginsBefore = w.sandbox.stats().loginRequests;
    await w.clock.advance((3 * 3600 + 900) * 1000); // 2700 s left: below the token's soft threshold
    expect((await client.getToken(SET_ID)).tokenId).toBe(first.tokenId);
    expect(tokenRequests()).toHaveLength(1);

    const fresh = await client.getToken(SET_ID, { minValiditySeconds: 2800 });
    expect(tokenRequests().at(-1)?.query).toBe('?minValiditySeconds=2800');
    expect(fresh.tokenId).not.toBe(first.tokenId);
    expect(fresh.expiresInSeconds).toBeGreaterThanOrEqual(2800);
    expect(w.sandbox.stats().loginRequests).toBe(loginsBefore + 1);
    // The new token now serves everyone, without another request.
    expect((await client.getToken(SET_ID)).tokenId).toBe(fresh.tokenId);
    expect(tokenRequests()).toHaveLength(2);
  });

  it('forceRefresh asks the broker even with a good cached token', async () => {
    const client = w.client();
    await client.getToken(SET_ID);
    await client.getToken(SET_ID, { forceRefresh: true });
    expect(tokenRequests()).toHaveLength(2);
  });

  it('reports broker errors with the vend code and request id, and nothing is cached from them', async () => {
    const client = w.client();
    const error = await client.getToken(SET_ID, { minValiditySeconds: 999_999 }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      name: 'BrokerApiError',
      code: 'INVALID_VALUE',
      status: 400,
      details: { field: 'minValiditySeconds' },
    });
    expect((error as { requestId?: string }).requestId).toMatch(/^[0-9a-f-]{36}$/);
    const unknown = await client.getToken('uat-nope').catch((e: unknown) => e);
    expect(unknown).toMatchObject({ code: 'RESOURCE_NOT_FOUND', status: 404 });
    // After the failures a normal call works and asks the broker.
    await client.getToken(SET_ID);
    expect(tokenRequests()).toHaveLength(2);
  });

  it('refuses calls after close', async () => {
    const client = w.client();
    await client.close();
    await expect(client.getToken(SET_ID)).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
  });

  it('no token in any error the client throws (message, fields, cause chain)', async () => {
    const client = w.client({ retry: { maxAttempts: 2, random: () => 0 } });
    const token = await client.getToken(SET_ID);
    const path = `/users/1/${TENANT}/serviceKey/k`;
    const errors: unknown[] = [];
    const keep = (e: unknown) => {
      errors.push(e);
    };
    await client.vendorRequest(SET_ID, { method: 'GET', path }).catch(keep); // 404
    w.sandbox.inject({ errorCode: 'TOKEN_INVALID', target: 'resources', count: 2 });
    await client.vendorRequest(SET_ID, { method: 'GET', path }).catch(keep); // 401 twice
    w.sandbox.inject({ status: 503, count: 2, target: 'resources' });
    await client.vendorRequest(SET_ID, { method: 'GET', path }).catch(keep); // 503 twice
    await client.getToken(SET_ID, { minValiditySeconds: -1 }).catch(keep); // refused before asking
    await client.getToken(SET_ID, { minValiditySeconds: 99_999, forceRefresh: true }).catch(keep); // broker 400
    await client.acquirePermit(SET_ID, 'ffffffffffffffff').catch(keep); // broker 400 for an unknown token
    const controller = new AbortController();
    controller.abort();
    await client.vendorRequest(SET_ID, { method: 'GET', path, signal: controller.signal }).catch(keep);
    expect(errors.map((e) => (e as { code?: string }).code)).toEqual([
      'RESOURCE_NOT_FOUND',
      'TOKEN_INVALID',
      'SERVICE_UNAVAILABLE',
      'INVALID_CLIENT_REQUEST',
      'INVALID_VALUE',
      'INVALID_VALUE',
      'REQUEST_ABORTED',
    ]);
    const current = await client.getToken(SET_ID);
    for (const error of errors) {
      const text = `${String(error)} ${JSON.stringify(error)} ${inspect(error, { depth: 8, showHidden: true })}`;
      expectNoSecrets(text, [token.accessToken, current.accessToken, ...sandboxPasswords()]);
    }
  });

  it('no token or password reaches the client telemetry or the broker logs', async () => {
    const { MemoryTelemetry } = await import('../shared/observability.js');
    const telemetry = new MemoryTelemetry();
    const client = w.client({ telemetry });
    const token = await client.getToken(SET_ID);
    await client
      .vendorRequest(SET_ID, { method: 'GET', path: `/users/1/${TENANT}/serviceKey/nothing-here` })
      .catch(() => undefined);
    const dumps = `${telemetry.dump()} ${w.brokerTelemetry.dump()}`;
    expectNoSecrets(dumps, [token.accessToken, ...sandboxPasswords()]);
    expect(dumps).toContain(token.tokenId);
  });
});
