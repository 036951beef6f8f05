import { describe, expect, it } from 'vitest';
import { Metric } from '../shared/metric-names.js';
import { tokenId } from '../shared/vendor-client/token-id.js';
import {
  advisorLogins,
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

describe('POST /v1/credential-sets/{id}/token/rejections', () => {
  const reject = (tokenIdValue: string, extra: Record<string, unknown> = {}) =>
    h.invoke(
      withChanges(fixture('report-token-rejection'), {
        body: { tokenId: tokenIdValue, errorCode: 'TOKEN_INVALID', requestId: 'req-4f2a9c1e7d3b', ...extra },
      }),
    );

  it('re-logs in when the rejected token is the current one, and answers the new token', async () => {
    h = await startHarness({ sandbox: { invalidatePreviousTokenOnLogin: true } });
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(120_000); // past the refresher's minimum interval between attempts
    const result = await reject(first.tokenId);
    expect(result.statusCode).toBe(200);
    expect(result.headers['cache-control']).toBe('no-store');
    const body = parseBody<TokenBody>(result);
    expect(body.tokenId).not.toBe(first.tokenId);
    expect(body.reloggedIn).toBe(true);
    expect(body.tokenId).toBe(tokenId(body.accessToken));
    expect(advisorLogins(h)).toBe(2);
    expect(h.telemetry.sum(Metric.TokenRejectionsReported, { CredentialSet: 'uat-advisor' })).toBe(1);
    expect(h.telemetry.logs.at(-1)?.attributes).toMatchObject({
      decision: 'RELOGIN_AFTER_REJECTION',
      rejectedTokenId: first.tokenId,
      tokenId: body.tokenId,
      vendorErrorCode: 'TOKEN_INVALID',
      vendorRequestId: 'req-4f2a9c1e7d3b',
    });
    // The GET path sees the new token at once (the cache was refreshed by the re-read).
    expect(parseBody<TokenBody>(await getToken(h)).tokenId).toBe(body.tokenId);

    // Reporting the old token again: the current one, no login.
    const old = await reject(first.tokenId);
    expect(parseBody<TokenBody>(old)).toMatchObject({ tokenId: body.tokenId, reloggedIn: false });
    expect(advisorLogins(h)).toBe(2);
  });

  it('20 consumers reporting the current token at once cause exactly one re-login', async () => {
    h = await startHarness({ sandbox: { invalidatePreviousTokenOnLogin: true } });
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(120_000);
    const results = await Promise.all(Array.from({ length: 20 }, () => reject(first.tokenId)));
    const ids = new Set(results.map((r) => parseBody<TokenBody>(r).tokenId));
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(ids.size).toBe(1);
    expect(ids.has(first.tokenId)).toBe(false);
    expect(advisorLogins(h)).toBe(2);
  });

  it('refuses malformed reports with 400 and does not log in', async () => {
    h = await startHarness();
    const first = parseBody<TokenBody>(await getToken(h));
    for (const [extra, code, field] of [
      [{ errorCode: 'TOKEN_MISSING' }, 'INVALID_VALUE', 'errorCode'],
      [{ errorCode: 42 }, 'INVALID_FORMAT', 'errorCode'],
      [{ errorCode: undefined }, 'MISSING_REQUIRED_FIELD', 'errorCode'],
      [{ requestId: 'x'.repeat(200) }, 'INVALID_FORMAT', 'requestId'],
      [{ tokenId: 'NOT-A-TOKEN-ID' }, 'INVALID_FORMAT', 'tokenId'],
    ] as const) {
      const result = await reject(first.tokenId, extra);
      expect(result.statusCode, JSON.stringify(extra)).toBe(400);
      expect(parseBody(result)).toMatchObject({ errorCode: code, details: { field } });
    }
    expect(advisorLogins(h)).toBe(1);
  });
});
