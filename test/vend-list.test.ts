import { describe, expect, it } from 'vitest';
import {
  fixture,
  getToken,
  parseBody,
  type TokenBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

const startHarness = vendHarnessPerTest();
let h: VendHarness;

describe('GET /v1/credential-sets', () => {
  it('lists the caller’s sets with their health and no token', async () => {
    h = await startHarness();
    const before = await h.invoke(fixture('list-credential-sets'));
    expect(parseBody(before)).toEqual({
      credentialSets: [
        {
          id: 'uat-advisor',
          environment: 'uat',
          companyRole: 'advisor',
          health: {
            state: 'NO_USABLE_TOKEN',
            expiresAt: null,
            expiresInSeconds: null,
            refreshedAt: null,
            lastError: null,
            consecutiveFailures: 0,
            nextAttemptAt: null,
            rateLimitedUntil: null,
          },
          quotaScope: 'token',
          quota: null,
        },
      ],
    });
    const obtainedAt = new Date(h.clock.now()).toISOString();
    const token = parseBody<TokenBody>(await getToken(h));
    await h.invoke(withChanges(fixture('acquire-permits'), { body: { tokenId: token.tokenId, count: 3 } }));
    await h.clock.advance(31_000);
    const after = await h.invoke(fixture('list-credential-sets'));
    expect(after.statusCode).toBe(200);
    expect(after.headers['cache-control']).toBe('no-store');
    expect(parseBody(after)).toEqual({
      credentialSets: [
        {
          id: 'uat-advisor',
          environment: 'uat',
          companyRole: 'advisor',
          health: {
            state: 'HEALTHY',
            expiresAt: token.expiresAt,
            // On the vendor's clock: 31 s after the token answer.
            expiresInSeconds: token.expiresInSeconds - 31,
            refreshedAt: obtainedAt,
            lastError: null,
            consecutiveFailures: 0,
            nextAttemptAt: null,
            rateLimitedUntil: null,
          },
          quotaScope: 'token',
          // What is left of the current token's quota: 3 permits were granted 31 s ago.
          quota: [
            { limit: 50, windowSeconds: 60, remaining: 47, used: 3 },
            { limit: 1000, windowSeconds: 3600, remaining: 997, used: 3 },
          ],
        },
      ],
    });
    expect(after.body).not.toContain(token.accessToken);
    expect(after.body).not.toContain(token.tokenId);
  });

  it('shows the last error code and time when the credentials were rejected', async () => {
    h = await startHarness();
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'wrong' }, 'v2');
    await getToken(h);
    const list = parseBody<{ credentialSets: { health: unknown }[] }>(
      await h.invoke(fixture('list-credential-sets')),
    );
    expect(list.credentialSets[0]?.health).toEqual({
      state: 'CREDENTIALS_REJECTED',
      expiresAt: null,
      expiresInSeconds: null,
      refreshedAt: null,
      lastError: {
        code: 'INVALID_CREDENTIALS',
        at: new Date(h.clock.now()).toISOString(),
        requestId: expect.stringMatching(/^req-/),
      },
      consecutiveFailures: 1,
      // The credentials cooldown (900 s by default) before the same secret version is tried again.
      nextAttemptAt: new Date(h.clock.now() + 900_000).toISOString(),
      rejectionsOfSecretVersion: 1,
      rateLimitedUntil: null,
    });
    // Rejected again once the cooldown passed: the wait grows to an hour.
    await h.clock.advance(900_000);
    await getToken(h);
    const again = parseBody<{ credentialSets: { health: Record<string, unknown> }[] }>(
      await h.invoke(fixture('list-credential-sets')),
    );
    expect(again.credentialSets[0]?.health).toMatchObject({
      consecutiveFailures: 2,
      rejectionsOfSecretVersion: 2,
      nextAttemptAt: new Date(h.clock.now() + 3_600_000).toISOString(),
    });
  });

  it('lists only the sets of the caller: a role with a path sees its own', async () => {
    h = await startHarness();
    const list = parseBody<{ credentialSets: { id: string }[] }>(
      await h.invoke(
        withChanges(fixture('get-token-role-with-path'), { path: '/v1/credential-sets', query: '' }),
      ),
    );
    expect(list.credentialSets.map((s) => s.id)).toEqual(['uat-execution']);
  });
});

describe('GET /v1/credential-sets with the vendor clock ahead', () => {
  it('says what the vendor would say is left, not what our clock says', async () => {
    h = await startHarness({ sandbox: { clockOffsetSeconds: 400 } });
    const token = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(60_000);
    const list = parseBody<{ credentialSets: { health: { expiresAt: number; expiresInSeconds: number } }[] }>(
      await h.invoke(fixture('list-credential-sets')),
    );
    const health = list.credentialSets[0]?.health;
    // The vendor's exp is 4 h after its own clock at login, 400 s ahead of ours.
    expect(health?.expiresAt).toBe(token.expiresAt);
    expect(health?.expiresAt).toBe(Math.floor(h.clock.now() / 1000) - 60 + 400 + 4 * 3600);
    // Less the second of the vendor's Date, which the broker takes as passed (never overstating what is left).
    expect(health?.expiresInSeconds).toBe(4 * 3600 - 60 - 1);
  });
});
