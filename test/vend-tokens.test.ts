import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import type { CredentialSetConfig } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import { softThresholdSeconds } from '../shared/tokens/index.js';
import { tokenId } from '../shared/vendor-client/token-id.js';
import {
  advisorLogins,
  errorBodyProblems,
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

describe('GET /v1/credential-sets/{id}/token', () => {
  it('logs in once on a cold start and answers the token with its login-result fields and quota', async () => {
    h = await startHarness();
    const result = await getToken(h);
    expect(result.statusCode).toBe(200);
    expect(result.headers['cache-control']).toBe('no-store');
    const body = parseBody<TokenBody>(result);
    const claims = decodeJwt(body.accessToken);
    expect(body).toEqual({
      credentialSet: 'uat-advisor',
      environment: 'uat',
      accessToken: body.accessToken,
      tokenId: tokenId(body.accessToken),
      expiresAt: claims.exp,
      // Less the second of the vendor's Date, which the broker takes as passed (never overstating what is left).
      expiresInSeconds: (claims.exp ?? 0) - h.clock.now() / 1000 - 1,
      tenant: 'uat-advisor-tenant',
      companyKey: 'CMP-UAT-ADVISOR',
      executionPlatformKey: 'EXP-UAT-0001',
      userKey: 'USR-UAT-ADV-0001',
      vendorBaseUrl: h.sandbox.url,
      quota: [
        { limit: 50, windowSeconds: 60, remaining: 50 },
        { limit: 1000, windowSeconds: 3600, remaining: 1000 },
      ],
      // The set has no request classes.
      classes: [],
    });
    expect(claims.env).toBe('uat');
    expect(body.expiresInSeconds).toBe(4 * 3600 - 1);
    expect(advisorLogins(h)).toBe(1);
    expect(h.telemetry.sum(Metric.TokensVended, { CredentialSet: 'uat-advisor' })).toBe(1);
    const line = h.telemetry.logs.find((log) => log.message === 'vend request');
    expect(line?.attributes).toMatchObject({
      caller: 'arn:aws:sts::123456789012:assumed-role/portfolio-service/portfolio-service-prod-fn',
      consumers: ['portfolio'],
      credentialSet: 'uat-advisor',
      tokenId: body.tokenId,
      decision: 'VENDED_AFTER_LOGIN',
      status: 200,
    });
    expect(h.telemetry.dump()).not.toContain(body.accessToken);
  });

  it('serves the warm path from memory, re-reads after the cache interval, and often near the soft threshold', async () => {
    h = await startHarness({ vend: { cacheTtlMs: 30_000, nearThresholdTtlMs: 1_000 } });
    const first = parseBody<TokenBody>(await getToken(h));
    const readsAfterFirst = h.store.reads;
    for (let i = 0; i < 20; i++) {
      await h.clock.advance(1_000);
      expect(parseBody<TokenBody>(await getToken(h)).tokenId).toBe(first.tokenId);
    }
    // 20 s: all from memory, its version confirmed once a second (one small read each).
    expect(h.store.reads).toBe(readsAfterFirst);
    expect(h.store.versionReads).toBe(20);
    await h.clock.advance(11_000);
    await getToken(h);
    expect(h.store.reads).toBe(readsAfterFirst + 1);
    expect(h.telemetry.logs.at(-1)?.attributes.source).toBe('store');
    // Inside the token's soft-threshold window (a fifth of its 4 h, less this set's jitter), every second's
    // first request reads again.
    const soft = softThresholdSeconds(h.sets[0] as CredentialSetConfig, 4 * 3600);
    expect(soft).toBeLessThanOrEqual(2880);
    await h.clock.advance((first.expiresInSeconds - 31 - (soft - 100)) * 1000);
    await getToken(h);
    const reads = h.store.reads;
    await getToken(h);
    expect(h.store.reads).toBe(reads);
    await h.clock.advance(1_000);
    await getToken(h);
    expect(h.store.reads).toBe(reads + 1);
    expect(advisorLogins(h)).toBe(1);
  });

  it('re-logs in when the token has less than minValiditySeconds left, and defaults to the 300 s floor', async () => {
    h = await startHarness();
    const first = parseBody<TokenBody>(await getToken(h));
    // 40 minutes left: enough for the default (300 s) and for 1800 s, not for 3000 s.
    await h.clock.advance((first.expiresInSeconds - 2400) * 1000);
    expect(parseBody<TokenBody>(await getToken(h, '')).tokenId).toBe(first.tokenId);
    expect(parseBody<TokenBody>(await getToken(h, 'minValiditySeconds=1800')).tokenId).toBe(first.tokenId);
    expect(advisorLogins(h)).toBe(1);
    const renewed = parseBody<TokenBody>(await getToken(h, 'minValiditySeconds=3000'));
    expect(renewed.tokenId).not.toBe(first.tokenId);
    expect(renewed.expiresInSeconds).toBe(4 * 3600 - 1);
    expect(advisorLogins(h)).toBe(2);
    expect(h.telemetry.logs.at(-1)?.attributes.decision).toBe('VENDED_AFTER_LOGIN');
  });

  it('never hands out a token past the hard floor, even when asked for less', async () => {
    h = await startHarness();
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance((first.expiresInSeconds - 200) * 1000);
    const next = parseBody<TokenBody>(await getToken(h, 'minValiditySeconds=0'));
    expect(next.tokenId).not.toBe(first.tokenId);
    expect(next.expiresInSeconds).toBeGreaterThan(300);
  });

  it('refuses a bad minValiditySeconds with 400 naming it, before anything is read or logged in', async () => {
    h = await startHarness();
    const cases: [string, string][] = [
      ['minValiditySeconds=abc', 'INVALID_FORMAT'],
      ['minValiditySeconds=-5', 'INVALID_FORMAT'],
      ['minValiditySeconds=1.5', 'INVALID_FORMAT'],
      ['minValiditySeconds=', 'INVALID_FORMAT'],
      ['minValiditySeconds=300&minValiditySeconds=600', 'INVALID_FORMAT'],
      // Above the soft threshold (3600 s): a consumer may not force a login the schedule would not make.
      ['minValiditySeconds=3601', 'INVALID_VALUE'],
      ['minValiditySeconds=99999999', 'INVALID_VALUE'],
    ];
    for (const [query, code] of cases) {
      const result = await getToken(h, query);
      expect(result.statusCode, query).toBe(400);
      expect(parseBody(result), query).toMatchObject({
        errorCode: code,
        details: { field: 'minValiditySeconds' },
      });
      expect(errorBodyProblems(result)).toEqual([]);
    }
    expect(h.store.reads).toBe(0);
    expect(h.sandbox.stats().loginRequests).toBe(0);
    expect((await getToken(h, 'minValiditySeconds=3600&unrelated=1')).statusCode).toBe(200);
  });

  it('answers 503 TOKEN_UNAVAILABLE with Retry-After during a vendor outage, and does not ask again until then', async () => {
    h = await startHarness();
    h.sandbox.update({ outage: true });
    const result = await getToken(h);
    expect(result.statusCode).toBe(503);
    expect(errorBodyProblems(result)).toEqual([]);
    expect(parseBody(result)).toMatchObject({
      errorCode: 'TOKEN_UNAVAILABLE',
      requestId: '5b0f0f43-1f5c-4a51-9d4f-0a1b2c3d4e02',
    });
    const retryAfter = Number(result.headers['retry-after']);
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    expect(result.body).not.toMatch(/eyJ[\w-]+\.[\w-]+\./);
    const invokes = h.refreshInvoker.calls;
    const again = await getToken(h);
    expect(again.statusCode).toBe(503);
    expect(h.refreshInvoker.calls).toBe(invokes);
    // After the wait, and the outage over, the next request gets a token.
    h.sandbox.update({ outage: false });
    await h.clock.advance(retryAfter * 1000);
    expect((await getToken(h)).statusCode).toBe(200);
  });

  it('answers 503 when the re-login takes longer than the bounded wait; the login still serves the next request', async () => {
    // The vendor answers after 500 ms of real time; the request waits at most 1 s of the (manual) clock.
    h = await startHarness({ sandbox: { latencyMs: 500 }, vend: { refreshWaitMs: 1_000 } });
    const pending = getToken(h);
    // As soon as the request waits on the clock (not a fixed real-time pause, which a loaded machine outlasts).
    while (h.clock.pendingSleepers === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    await h.clock.advance(1_000);
    const result = await pending;
    expect(result.statusCode).toBe(503);
    expect(parseBody(result)).toMatchObject({ errorCode: 'TOKEN_UNAVAILABLE' });
    expect(result.headers['retry-after']).toBe('2');
    while (advisorLogins(h) === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    const next = await getToken(h);
    expect(next.statusCode).toBe(200);
    expect(h.sandbox.stats().loginRequests).toBe(1);
  });

  it('answers 503 with the credentials cooldown as Retry-After when the password is wrong', async () => {
    h = await startHarness();
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'wrong' }, 'v2');
    const result = await getToken(h);
    expect(result.statusCode).toBe(503);
    expect(Number(result.headers['retry-after'])).toBe(900);
    expect(parseBody(result)).toMatchObject({ errorMessage: expect.stringContaining('INVALID_CREDENTIALS') });
    expect(h.telemetry.dump()).not.toContain('"wrong"');
  });
});

describe('quota figures in the token answer', () => {
  it('are kept in memory for a second, and dropped at once when this process changes the ledger', async () => {
    h = await startHarness({ vend: { quotaCacheMs: 1_000 } });
    const first = parseBody<TokenBody>(await getToken(h));
    const other = h.newContainer();
    const permit = (invoke: VendHarness['invoke']) =>
      invoke(withChanges(fixture('acquire-permits'), { body: { tokenId: first.tokenId, count: 5 } }));
    // Another container spends 5: this one still shows the figures it read, for up to a second.
    expect((await permit(other.invoke)).statusCode).toBe(200);
    expect(parseBody<TokenBody>(await getToken(h)).quota?.[0]?.remaining).toBe(50);
    await h.clock.advance(1_000);
    expect(parseBody<TokenBody>(await getToken(h)).quota?.[0]?.remaining).toBe(45);
    // This container spends 5: its next answer shows it at once.
    expect((await permit(h.invoke)).statusCode).toBe(200);
    expect(parseBody<TokenBody>(await getToken(h)).quota?.[0]?.remaining).toBe(40);
  });
});
