import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { Metric } from '../shared/metric-names.js';
import {
  errorBodyProblems,
  fixture,
  parseBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';
import { type VendHarnessOptions, vendHarnessPerTest } from './support/vend-suite.js';

interface Remaining {
  limit: number;
  windowSeconds: number;
  remaining: number;
  class?: string;
}
interface Grant {
  granted: number;
  grantedAt: number;
  receipt: string;
  validUntil: number;
  remaining: Remaining[];
}

const startHarness = vendHarnessPerTest();
let h: VendHarness;
let tokenId: string;

async function start(options: VendHarnessOptions = {}): Promise<void> {
  h = await startHarness(options);
  tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
}
const acquire = (body: unknown) => h.invoke(withChanges(fixture('acquire-permits'), { body }));
const giveBack = (body: unknown) => h.invoke(withChanges(fixture('return-permits'), { body }));
const report = (body: unknown) => h.invoke(withChanges(fixture('report-rate-limit'), { body }));
const quota = async () =>
  parseBody<{ quota: Remaining[] }>(await h.invoke(withChanges(fixture('get-token'), { query: '' }))).quota;

describe('POST /v1/credential-sets/{id}/permits', () => {
  it('grants permits with their validity and what remains, then denies with 429 and Retry-After', async () => {
    await start();
    const first = await acquire({ tokenId, count: 2 });
    expect(first.statusCode).toBe(200);
    expect(first.headers['cache-control']).toBe('no-store');
    const grant = parseBody<Grant>(first);
    expect(grant).toEqual({
      credentialSet: 'uat-advisor',
      tokenId,
      granted: 2,
      grantedAt: h.clock.now(),
      validUntil: h.clock.now() + rateLimitSettingsSchema.parse({}).permitValiditySeconds * 1000,
      receipt: expect.stringMatching(/^r1\.[A-Za-z0-9._-]{20,200}$/),
      remaining: [
        { limit: 50, windowSeconds: 60, remaining: 48 },
        { limit: 1000, windowSeconds: 3600, remaining: 998 },
      ],
      available: 48,
      maxCount: 50,
    });
    expect((await acquire({ tokenId, count: 48 })).statusCode).toBe(200);
    const denied = await acquire({ tokenId, count: 1 });
    expect(denied.statusCode).toBe(429);
    expect(errorBodyProblems(denied)).toEqual([]);
    expect(parseBody(denied)).toMatchObject({
      errorStatus: 429,
      errorCode: 'RATE_LIMIT_EXCEEDED',
      details: { reason: 'QUOTA', available: 0, maxCount: 50 },
    });
    const retryAfter = Number(denied.headers['retry-after']);
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 66).toBe(true);
    await h.clock.advance(retryAfter * 1000);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(200);
    expect(h.telemetry.sum(Metric.PermitsGranted, { CredentialSet: 'uat-advisor' })).toBe(51);
    expect(h.telemetry.sum(Metric.PermitsDenied, { CredentialSet: 'uat-advisor' })).toBe(1);
    expect(h.telemetry.logs.filter((l) => l.attributes.decision === 'DENIED_QUOTA')).toHaveLength(1);
  });

  it('reads a base64-encoded body (binary content type at the Function URL)', async () => {
    await start();
    const event = fixture('acquire-permits-base64');
    const json = JSON.parse(Buffer.from(event.body ?? '', 'base64').toString('utf8')) as Record<
      string,
      unknown
    >;
    event.body = Buffer.from(JSON.stringify({ ...json, tokenId })).toString('base64');
    const result = await h.invoke(event);
    expect(result.statusCode).toBe(200);
    expect(parseBody<Grant>(result).granted).toBe(1);
  });

  it('counts class permits against the class and the general limits', async () => {
    await start({
      setOverrides: { rateLimits: { classes: { reports: [{ limit: 5, windowSeconds: 60 }] } } },
    });
    const grant = parseBody<Grant>(await acquire({ tokenId, count: 5, class: 'reports' }));
    expect(grant.remaining).toEqual(
      expect.arrayContaining([
        { limit: 50, windowSeconds: 60, remaining: 45 },
        { limit: 5, windowSeconds: 60, remaining: 0, class: 'reports' },
      ]),
    );
    expect((await acquire({ tokenId, count: 1, class: 'reports' })).statusCode).toBe(429);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(200);
    const tooMany = await acquire({ tokenId, count: 6, class: 'reports' });
    expect(parseBody(tooMany)).toMatchObject({ errorCode: 'INVALID_VALUE', details: { field: 'count' } });
  });

  it("keeps a reservation for the caller's consumer (by its configured name) when another consumer takes the rest", async () => {
    await start({
      setOverrides: { rateLimits: { reservations: [{ consumer: 'portfolio', perWindow: { 60: 20 } }] } },
    });
    const asBatch = (body: unknown) =>
      h.invoke(
        withChanges(fixture('acquire-permits'), {
          body,
          callerArn: 'arn:aws:iam::123456789012:user/ops/batch-runner',
        }),
      );
    // batch (no reservation) can never have more than the shared 30 at once: 400 naming the field and the most.
    const tooMany = await asBatch({ tokenId, count: 31 });
    expect(tooMany.statusCode).toBe(400);
    expect(parseBody(tooMany)).toMatchObject({
      errorCode: 'INVALID_VALUE',
      details: { field: 'count', maxCount: 30 },
    });
    // Each caller is told what it may have: batch the shared part, portfolio its reservation besides.
    expect(parseBody(await asBatch({ tokenId, count: 1 }))).toMatchObject({ available: 29, maxCount: 30 });
    expect(parseBody(await acquire({ tokenId, count: 1 }))).toMatchObject({ available: 48, maxCount: 50 });
    // batch (no reservation) gets the rest of the shared 30, then is denied for quota, while the general window
    // still has room (portfolio's reservation): `available` says 0, `remaining` does not.
    expect(parseBody(await asBatch({ tokenId, count: 29 }))).toMatchObject({
      available: 0,
      remaining: expect.arrayContaining([{ limit: 50, windowSeconds: 60, remaining: 19 }]),
    });
    const refused = await asBatch({ tokenId, count: 1 });
    expect(refused.statusCode).toBe(429);
    expect(parseBody(refused)).toMatchObject({ details: { reason: 'QUOTA', available: 0, maxCount: 30 } });
    // portfolio (the fixture's caller) still gets the rest of its 20; its receipt carries the split.
    const grant = await acquire({ tokenId, count: 19 });
    expect(grant.statusCode).toBe(200);
    const { receipt } = parseBody<Grant>(grant);
    expect(receipt).toMatch(/^r2\.[A-Za-z0-9._*-]+\.1aao-j\.[A-Za-z0-9_-]{22}$/);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(429);
    // Given back through the route: to its reservation (none of it came from the shared part).
    const back = await giveBack({ tokenId, receipt, count: 5 });
    expect(back.statusCode).toBe(200);
    expect((await asBatch({ tokenId, count: 1 })).statusCode).toBe(429);
    expect((await acquire({ tokenId, count: 5 })).statusCode).toBe(200);
  });

  it('refuses bad bodies with 400 naming the field, and writes nothing', async () => {
    await start({
      setOverrides: { rateLimits: { classes: { reports: [{ limit: 5, windowSeconds: 60 }] } } },
    });
    const cases: [unknown, number, string, string][] = [
      [{ count: 1 }, 400, 'MISSING_REQUIRED_FIELD', 'tokenId'],
      [{ tokenId }, 400, 'MISSING_REQUIRED_FIELD', 'count'],
      [{ tokenId: 42, count: 1 }, 400, 'INVALID_FORMAT', 'tokenId'],
      [{ tokenId: tokenId.toUpperCase(), count: 1 }, 400, 'INVALID_FORMAT', 'tokenId'],
      [{ tokenId, count: '2' }, 400, 'INVALID_FORMAT', 'count'],
      [{ tokenId, count: 0 }, 400, 'INVALID_VALUE', 'count'],
      [{ tokenId, count: 1.5 }, 400, 'INVALID_VALUE', 'count'],
      [{ tokenId, count: 51 }, 400, 'INVALID_VALUE', 'count'],
      [{ tokenId, count: 1, class: 'rebalancing' }, 400, 'INVALID_VALUE', 'class'],
      [{ tokenId, count: 1, class: 'Reports!' }, 400, 'INVALID_FORMAT', 'class'],
      [{ tokenId, count: 1, cout: 1 }, 400, 'INVALID_VALUE', 'cout'],
      // A well-formed id that is not this set's current or previous token.
      [{ tokenId: '0123456789abcdef', count: 1 }, 400, 'INVALID_VALUE', 'tokenId'],
      ['{"tokenId":', 400, 'INVALID_FORMAT', 'body'],
      ['[1,2]', 400, 'INVALID_FORMAT', 'body'],
      ['null', 400, 'INVALID_FORMAT', 'body'],
      ['   ', 400, 'MISSING_REQUIRED_FIELD', 'body'],
      ['x'.repeat(9000), 413, 'PAYLOAD_TOO_LARGE', 'body'],
    ];
    for (const [body, status, code, field] of cases) {
      const result = await acquire(body);
      const label = typeof body === 'string' ? body.slice(0, 20) : JSON.stringify(body);
      expect(result.statusCode, label).toBe(status);
      expect(parseBody(result), label).toMatchObject({ errorCode: code, details: { field } });
      expect(errorBodyProblems(result), label).toEqual([]);
    }
    const textPlain = withChanges(fixture('acquire-permits'), {
      body: { tokenId, count: 1 },
      headers: { 'content-type': 'text/plain' },
    });
    expect(parseBody(await h.invoke(textPlain))).toMatchObject({
      errorCode: 'INVALID_FORMAT',
      details: { field: 'content-type' },
    });
    const badBase64 = { ...fixture('acquire-permits-base64'), body: '%%%not-base64%%%' };
    expect(parseBody(await h.invoke(badBase64))).toMatchObject({
      errorCode: 'INVALID_FORMAT',
      details: { field: 'body' },
    });
    const notUtf8 = {
      ...fixture('acquire-permits-base64'),
      body: Buffer.from([0xff, 0xfe, 0x7b]).toString('base64'),
    };
    expect(parseBody(await h.invoke(notUtf8))).toMatchObject({
      errorCode: 'INVALID_FORMAT',
      details: { field: 'body' },
    });
    expect(await h.ledgerItems()).toBe(0);
    expect(h.telemetry.sum(Metric.PermitsGranted)).toBe(0);
  });

  it('accepts the previous token until it expires, and refuses it afterwards', async () => {
    await start({ sandbox: { invalidatePreviousTokenOnLogin: false } });
    const old = tokenId;
    await h.clock.advance(120_000);
    const rejected = await h.invoke(
      withChanges(fixture('report-token-rejection'), { body: { tokenId: old, errorCode: 'TOKEN_EXPIRED' } }),
    );
    const current = parseBody<{ tokenId: string; expiresInSeconds: number }>(rejected).tokenId;
    expect(current).not.toBe(old);
    expect((await acquire({ tokenId: old, count: 1 })).statusCode).toBe(200);
    expect((await acquire({ tokenId: current, count: 1 })).statusCode).toBe(200);
    await h.clock.advance((4 * 3600 - 120 + 1) * 1000); // the old token's exp has passed
    expect(parseBody(await acquire({ tokenId: old, count: 1 }))).toMatchObject({
      errorCode: 'INVALID_VALUE',
      details: { field: 'tokenId' },
    });
  });

  it('fails closed with 503 LEDGER_UNAVAILABLE when the ledger does not answer', async () => {
    await start();
    await h.dynamo.client.send(
      new (await import('@aws-sdk/client-dynamodb')).DeleteTableCommand({ TableName: h.ledgerTable }),
    );
    const result = await acquire({ tokenId, count: 1 });
    expect(result.statusCode).toBe(503);
    expect(result.headers['retry-after']).toBe('1');
    expect(parseBody(result)).toMatchObject({ errorCode: 'LEDGER_UNAVAILABLE' });
    expect(errorBodyProblems(result)).toEqual([]);
    // The token is still worth having without its quota figures.
    const token = await h.invoke(fixture('get-token'));
    expect(token.statusCode).toBe(200);
    expect(parseBody(token)).toMatchObject({ tokenId, quota: null });
  });
});

describe('POST /v1/credential-sets/{id}/permits/returns', () => {
  it('gives back unused permits of a grant by its receipt, once', async () => {
    await start();
    const grant = parseBody<Grant>(await acquire({ tokenId, count: 10 }));
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 40 });
    const returned = await giveBack({ tokenId, count: 4, receipt: grant.receipt });
    expect(returned.statusCode).toBe(200);
    expect(parseBody(returned)).toEqual({ credentialSet: 'uat-advisor', tokenId, returned: 4 });
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 44 });
    // The same receipt again (a retry, or a second try at the other 6): spent, nothing changes.
    const again = await giveBack({ tokenId, count: 6, receipt: grant.receipt });
    expect(again.statusCode).toBe(409);
    expect(parseBody(again)).toMatchObject({
      errorCode: 'RECEIPT_SPENT',
      details: { field: 'receipt', reason: 'SPENT' },
    });
    expect(errorBodyProblems(again)).toEqual([]);
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 44 });
  });

  it('gives back at most what the grant gave, whatever count is asked', async () => {
    await start();
    const small = parseBody<Grant>(await acquire({ tokenId, count: 2 }));
    parseBody<Grant>(await acquire({ tokenId, count: 30 }));
    const returned = await giveBack({ tokenId, count: 30, receipt: small.receipt });
    expect(parseBody(returned)).toEqual({ credentialSet: 'uat-advisor', tokenId, returned: 2 });
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 20 });
  });

  it("refuses a forged receipt, another caller's or token's, and an expired one: 4xx, nothing given back", async () => {
    await start();
    const grant = parseBody<Grant>(await acquire({ tokenId, count: 5 }));
    const parts = grant.receipt.split('.');
    const forged = [...parts.slice(0, 3), (50).toString(36), ...parts.slice(4)].join('.');
    const otherToken = [parts[0], 'fedcba9876543210', ...parts.slice(2)].join('.');
    const cases: [string, unknown, number, string, string][] = [
      ['forged count', { tokenId, count: 5, receipt: forged }, 400, 'INVALID_VALUE', 'FORGED'],
      ['not a receipt', { tokenId, count: 5, receipt: 'r1.nothing' }, 400, 'INVALID_VALUE', 'MALFORMED'],
      [
        "another token's",
        { tokenId, count: 5, receipt: otherToken },
        403,
        'RESOURCE_ACCESS_DENIED',
        'FOREIGN',
      ],
    ];
    for (const [name, body, status, code, reason] of cases) {
      const result = await giveBack(body);
      expect(result.statusCode, name).toBe(status);
      expect(parseBody(result), name).toMatchObject({
        errorCode: code,
        details: { field: 'receipt', reason },
      });
      expect(errorBodyProblems(result), name).toEqual([]);
    }
    // The batch runner may use this set too, but the grant was the portfolio service's.
    const foreign = await h.invoke(
      withChanges(fixture('return-permits'), {
        body: { tokenId, count: 5, receipt: grant.receipt },
        callerArn: 'arn:aws:iam::123456789012:user/ops/batch-runner',
      }),
    );
    expect(foreign.statusCode).toBe(403);
    expect(parseBody(foreign)).toMatchObject({ details: { field: 'receipt', reason: 'FOREIGN' } });
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 45 });
    await h.clock.advance(10_000);
    const expired = await giveBack({ tokenId, count: 5, receipt: grant.receipt });
    expect(expired.statusCode).toBe(410);
    expect(parseBody(expired)).toMatchObject({
      errorCode: 'RECEIPT_EXPIRED',
      details: { reason: 'EXPIRED' },
    });
    expect((await quota())?.[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 45 });
  });

  it('refuses bad returns with 400', async () => {
    await start();
    for (const [body, code, field] of [
      [{ tokenId, count: 1 }, 'MISSING_REQUIRED_FIELD', 'receipt'],
      [{ tokenId, count: 1, receipt: 7 }, 'INVALID_FORMAT', 'receipt'],
      [{ tokenId, count: 1, receipt: 'has spaces in it' }, 'INVALID_FORMAT', 'receipt'],
      [{ tokenId, count: 1, receipt: 'r1.x', grantedAt: 1 }, 'INVALID_VALUE', 'grantedAt'],
      [{ tokenId, count: 0, receipt: 'r1.x' }, 'INVALID_VALUE', 'count'],
      [{ tokenId: 'fedcba9876543210', count: 1, receipt: 'r1.x' }, 'INVALID_VALUE', 'tokenId'],
    ] as const) {
      const result = await giveBack(body);
      expect(result.statusCode, JSON.stringify(body)).toBe(400);
      expect(parseBody(result)).toMatchObject({ errorCode: code, details: { field } });
    }
    expect(await h.ledgerItems()).toBe(0);
  });
});

describe('POST /v1/credential-sets/{id}/rate-limit-reports', () => {
  it('a reported 429 stops every consumer of the token until Retry-After passes', async () => {
    await start();
    const result = await report({ tokenId, retryAfterSeconds: 30 });
    expect(result.statusCode).toBe(204);
    expect(result.body).toBeUndefined();
    expect(h.telemetry.sum(Metric.VendorRateLimitReported, { CredentialSet: 'uat-advisor' })).toBe(1);
    const denied = await acquire({ tokenId, count: 1 });
    expect(denied.statusCode).toBe(429);
    expect(parseBody(denied)).toMatchObject({ details: { reason: 'COOLDOWN' } });
    // The ledger spreads retry hints by up to 1 % of the shortest window, so consumers do not return together.
    const retryAfter = Number(denied.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(30);
    expect(retryAfter).toBeLessThanOrEqual(31);
    await h.clock.advance(29_000);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(429);
    await h.clock.advance(1_000);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(200);
  });

  it('reported remaining/reset can only make the ledger more careful', async () => {
    await start();
    const reset = Math.floor(h.clock.now() / 1000) + 40;
    expect((await report({ tokenId, limit: 50, remaining: 2, reset })).statusCode).toBe(204);
    expect(h.telemetry.sum(Metric.VendorRateLimitReported)).toBe(0);
    expect((await acquire({ tokenId, count: 2 })).statusCode).toBe(200);
    const denied = await acquire({ tokenId, count: 1 });
    expect(parseBody(denied)).toMatchObject({ details: { reason: 'VENDOR_CAP' } });
    // A looser report later does not lift the cap.
    expect((await report({ tokenId, limit: 50, remaining: 50, reset })).statusCode).toBe(204);
    expect((await acquire({ tokenId, count: 1 })).statusCode).toBe(429);
  });

  it('refuses bad reports with 400 and writes nothing', async () => {
    await start();
    for (const [body, code, field] of [
      [{ tokenId }, 'MISSING_REQUIRED_FIELD', 'retryAfterSeconds'],
      [{ tokenId, remaining: 3 }, 'MISSING_REQUIRED_FIELD', 'reset'],
      [{ tokenId, retryAfterSeconds: -1 }, 'INVALID_VALUE', 'retryAfterSeconds'],
      [{ tokenId, retryAfterSeconds: '30' }, 'INVALID_FORMAT', 'retryAfterSeconds'],
      [{ tokenId, retryAfterSeconds: 1e9 }, 'INVALID_VALUE', 'retryAfterSeconds'],
      [{ tokenId, limit: 0, remaining: 1, reset: 1 }, 'INVALID_VALUE', 'limit'],
      [{ tokenId: 'fedcba9876543210', retryAfterSeconds: 5 }, 'INVALID_VALUE', 'tokenId'],
    ] as const) {
      const result = await report(body);
      expect(result.statusCode, JSON.stringify(body)).toBe(400);
      expect(parseBody(result)).toMatchObject({ errorCode: code, details: { field } });
    }
    expect(await h.ledgerItems()).toBe(0);
  });
});
