import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DEFAULT_REPORT_LIMITS, reportLimitSettingsSchema } from '../shared/vend/report-limits.js';
import type { VendEvent } from '../shared/vend/vend-handler.js';
import {
  advisorLogins,
  errorBodyProblems,
  fixture,
  getToken,
  parseBody,
  settleWithClock,
  type TokenBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

/** The default margin: a cooldown is capped at the longest window plus it. */
const MARGIN_SECONDS = rateLimitSettingsSchema.parse({}).marginSeconds;
const startHarness = vendHarnessPerTest();
let h: VendHarness;

/** The two callers allowed uat-advisor: an assumed-role session (the fixtures' own) and an IAM user. */
const PORTFOLIO = 'arn:aws:sts::123456789012:assumed-role/portfolio-service/portfolio-service-prod-fn';
const BATCH = 'arn:aws:iam::123456789012:user/ops/batch-runner';
const as = (event: VendEvent, callerArn: string) =>
  withChanges(event, { callerArn, callerAccountId: '123456789012' });

const acquire = (tokenId: string, caller = PORTFOLIO) =>
  h.invoke(as(withChanges(fixture('acquire-permits'), { body: { tokenId, count: 1 } }), caller));
const report = (body: unknown, caller = PORTFOLIO, invoke = h.invoke) =>
  invoke(as(withChanges(fixture('report-rate-limit'), { body }), caller));
const reject = (tokenId: string, caller = PORTFOLIO, invoke = h.invoke) =>
  invoke(
    as(
      withChanges(fixture('report-token-rejection'), { body: { tokenId, errorCode: 'TOKEN_INVALID' } }),
      caller,
    ),
  );

/** The request log lines of one route, oldest first. */
const auditLines = (route: string) =>
  h.telemetry.logs
    .filter((log) => log.message === 'vend request' && log.attributes?.route === route)
    .map((log) => log.attributes ?? {});

/** Every ledger item of a token (its rate state), as stored: what a report could have changed. */
async function tokenItems(): Promise<string> {
  const scan = await h.dynamo.client.send(new ScanCommand({ TableName: h.ledgerTable }));
  const items = (scan.Items ?? []).filter((item) => item.pk?.S?.startsWith('token#'));
  return JSON.stringify(items.sort((a, b) => String(a.pk?.S).localeCompare(String(b.pk?.S))));
}

describe('report limits with REPORT_LIMITS unset', () => {
  it("are the schema's defaults, written out so that the cold start needs no parse", () => {
    expect(DEFAULT_REPORT_LIMITS).toEqual(reportLimitSettingsSchema.parse({}));
  });
});

describe('rate-limit reports: Retry-After and reset are capped per set', () => {
  it("retryAfterSeconds: 86400 from one caller pauses everyone a minute plus the margin; a second caller's, the longest window plus the margin, not a day", async () => {
    h = await startHarness();
    const { tokenId } = parseBody<TokenBody>(await getToken(h));
    const reported = await report({ tokenId, retryAfterSeconds: 86_400 });
    expect(reported.statusCode).toBe(204);
    expect(auditLines('reportRateLimit').at(-1)).toMatchObject({
      caller: PORTFOLIO,
      decision: 'VENDOR_429_REPORTED',
      reportedRetryAfterSeconds: 86_400,
    });
    // One caller's word: everyone is paused (the reporter and another consumer) for the shortest window and
    // the margin, all a single report naming no exhausted hour warrants.
    for (const caller of [PORTFOLIO, BATCH]) {
      const denied = await acquire(tokenId, caller);
      expect(denied.statusCode).toBe(429);
      expect(parseBody(denied)).toMatchObject({ details: { reason: 'COOLDOWN' } });
      expect(Number(denied.headers['retry-after'])).toBeGreaterThanOrEqual(60 + MARGIN_SECONDS);
      expect(Number(denied.headers['retry-after'])).toBeLessThanOrEqual(61 + MARGIN_SECONDS);
    }
    // A second caller says the same: now everyone waits the hour and the margin from the first report.
    await h.clock.advance(10_000);
    expect((await report({ tokenId, retryAfterSeconds: 86_400 }, BATCH)).statusCode).toBe(204);
    for (const caller of [PORTFOLIO, BATCH]) {
      const denied = await acquire(tokenId, caller);
      expect(parseBody(denied)).toMatchObject({ details: { reason: 'COOLDOWN' } });
      // Claims are kept in whole seconds: up to one less.
      expect(Number(denied.headers['retry-after'])).toBeGreaterThanOrEqual(3589 + MARGIN_SECONDS);
      expect(Number(denied.headers['retry-after'])).toBeLessThanOrEqual(3591 + MARGIN_SECONDS);
    }
    await h.clock.advance((3599 + MARGIN_SECONDS - 10) * 1000);
    expect((await acquire(tokenId, BATCH)).statusCode).toBe(429);
    await h.clock.advance(1_000);
    expect((await acquire(tokenId, PORTFOLIO)).statusCode).toBe(200);
    expect((await acquire(tokenId, BATCH)).statusCode).toBe(200);
  });

  it('a class window counts as the longest one, and a far reset is capped to the window of the limit it names', async () => {
    h = await startHarness({
      setOverrides: {
        rateLimits: {
          general: [{ limit: 50, windowSeconds: 60 }],
          classes: { reports: [{ limit: 5, windowSeconds: 600 }] },
          marginSeconds: 5,
        },
      },
    });
    const { tokenId } = parseBody<TokenBody>(await getToken(h));
    const farReset = Math.floor(h.clock.now() / 1000) + 86_400;
    expect((await report({ tokenId, limit: 50, remaining: 0, reset: farReset })).statusCode).toBe(204);
    expect(auditLines('reportRateLimit').at(-1)).toMatchObject({
      caller: PORTFOLIO,
      decision: 'RATE_HEADERS_REPORTED',
      reportedReset: farReset,
    });
    // The minute's cap ends with the minute and the margin, not with the far reset.
    await h.clock.advance(64_000);
    expect(parseBody(await acquire(tokenId))).toMatchObject({ details: { reason: 'VENDOR_CAP' } });
    await h.clock.advance(1_000);
    expect((await acquire(tokenId)).statusCode).toBe(200);
    // Two callers' Retry-After of 3700 s: held for the class's 600 s window and the margin, the longest.
    expect((await report({ tokenId, retryAfterSeconds: 3_700 }, BATCH)).statusCode).toBe(204);
    expect(auditLines('reportRateLimit').at(-1)).toMatchObject({
      caller: BATCH,
      reportedRetryAfterSeconds: 3_700,
    });
    expect((await report({ tokenId, retryAfterSeconds: 3_700 })).statusCode).toBe(204);
    await h.clock.advance(604_000);
    expect((await acquire(tokenId)).statusCode).toBe(429);
    await h.clock.advance(1_000);
    expect((await acquire(tokenId)).statusCode).toBe(200);
  });
});

describe('rate-limit reports: limited per caller and per set, across containers', () => {
  it('cuts a flood from one caller off at its limit; another caller still reports; refused reports change nothing', async () => {
    h = await startHarness({ reportLimits: { rateLimitReports: { perCaller: 5, perSet: 8 } } });
    const { tokenId } = parseBody<TokenBody>(await getToken(h));
    const other = h.newContainer();
    // 20 at once, half through another Lambda container: the count is shared, exactly 5 pass.
    const flood = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        report({ tokenId, retryAfterSeconds: 0 }, PORTFOLIO, i % 2 ? other.invoke : h.invoke),
      ),
    );
    expect(flood.filter((r) => r.statusCode === 204)).toHaveLength(5);
    const refused = flood.filter((r) => r.statusCode !== 204);
    expect(refused).toHaveLength(15);
    for (const result of refused) {
      expect(result.statusCode).toBe(429);
      expect(errorBodyProblems(result)).toEqual([]);
      expect(parseBody(result)).toMatchObject({
        errorCode: 'RATE_LIMIT_EXCEEDED',
        details: { reason: 'REPORT_LIMIT', scope: 'caller', limit: 5, windowSeconds: 60 },
      });
      const retryAfter = Number(result.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }

    // A refused report changes nothing: a day's Retry-After over the limit leaves the ledger as it was.
    const before = await tokenItems();
    const overLimit = await report({ tokenId, retryAfterSeconds: 86_400 });
    expect(overLimit.statusCode).toBe(429);
    expect(await tokenItems()).toBe(before);
    expect((await acquire(tokenId)).statusCode).toBe(200);

    // Another caller's reports still pass, up to what is left of the set's limit.
    for (let i = 0; i < 3; i++)
      expect((await report({ tokenId, retryAfterSeconds: 0 }, BATCH)).statusCode).toBe(204);
    const setFull = await report({ tokenId, retryAfterSeconds: 0 }, BATCH);
    expect(setFull.statusCode).toBe(429);
    expect(parseBody(setFull)).toMatchObject({ details: { reason: 'REPORT_LIMIT', scope: 'set', limit: 8 } });

    // Every report is on record with its caller and what was decided.
    const lines = auditLines('reportRateLimit');
    expect(lines).toHaveLength(25);
    const decisions = (caller: string) =>
      lines.filter((line) => line.caller === caller).map((line) => line.decision);
    expect(decisions(PORTFOLIO).filter((d) => d === 'VENDOR_429_REPORTED')).toHaveLength(5);
    expect(decisions(PORTFOLIO).filter((d) => d === 'REPORT_LIMITED_CALLER')).toHaveLength(16);
    expect(decisions(BATCH)).toEqual([
      'VENDOR_429_REPORTED',
      'VENDOR_429_REPORTED',
      'VENDOR_429_REPORTED',
      'REPORT_LIMITED_SET',
    ]);
    for (const line of lines) expect(line.status === 204 || line.status === 429).toBe(true);

    // The next window starts afresh.
    await h.clock.advance(60_000);
    expect((await report({ tokenId, retryAfterSeconds: 0 })).statusCode).toBe(204);
  });

  it('the defaults leave room for every 429 of a full minute of the vendor quota', async () => {
    h = await startHarness();
    const { tokenId } = parseBody<TokenBody>(await getToken(h));
    // A minute of the vendor's quota (50), each answered 429 and reported by one process of one consumer.
    for (let i = 0; i < 50; i++)
      expect((await report({ tokenId, retryAfterSeconds: 1 })).statusCode).toBe(204);
  });
});

describe('rejection reports: limited per caller and set, and at most one re-login per interval per set', () => {
  it('a flood of rejections from one caller causes one re-login, then 429s, never a 5xx', async () => {
    h = await startHarness({ sandbox: { invalidatePreviousTokenOnLogin: true } });
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(120_000); // past the refresher's storm guard
    const firstFlood = await Promise.all(Array.from({ length: 30 }, () => reject(first.tokenId)));
    expect(firstFlood.map((r) => r.statusCode)).toEqual(Array(30).fill(200));
    const second = parseBody<TokenBody>(firstFlood[0] as never).tokenId;
    expect(second).not.toBe(first.tokenId);
    expect(new Set(firstFlood.map((r) => parseBody<TokenBody>(r).tokenId))).toEqual(new Set([second]));
    expect(advisorLogins(h)).toBe(2);

    // The new token reported rejected again, every minute (the storm guard alone would allow a login each):
    // no login before 300 s after the last, and 429 with the time left, not 503.
    for (let minute = 1; minute <= 4; minute++) {
      await h.clock.advance(61_000);
      const results = await Promise.all(Array.from({ length: 10 }, () => reject(second)));
      for (const result of results) {
        expect(result.statusCode).toBe(429);
        expect(errorBodyProblems(result)).toEqual([]);
        expect(parseBody(result)).toMatchObject({ details: { reason: 'RELOGIN_LIMIT' } });
        expect(Number(result.headers['retry-after'])).toBe(300 - 61 * minute);
      }
    }
    expect(advisorLogins(h)).toBe(2);
    // The old token's reports still answer the current token at once, without a login.
    expect(parseBody<TokenBody>(await reject(first.tokenId))).toMatchObject({
      tokenId: second,
      reloggedIn: false,
    });

    await h.clock.advance(300_000 - 4 * 61_000);
    const later = await Promise.all(Array.from({ length: 10 }, () => reject(second)));
    expect(later.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    expect(advisorLogins(h)).toBe(3);
    const lines = auditLines('reportTokenRejection');
    expect(lines.every((line) => line.caller === PORTFOLIO && typeof line.decision === 'string')).toBe(true);
    expect(lines.filter((line) => line.decision === 'RELOGIN_LIMITED')).toHaveLength(40);
    expect(lines.filter((line) => line.decision === 'RELOGIN_AFTER_REJECTION').length).toBeGreaterThan(0);
  });

  it('many callers over two containers: still one re-login per interval; the per-caller limit holds', async () => {
    h = await startHarness({
      sandbox: { invalidatePreviousTokenOnLogin: true },
      // One window for the whole test (the clock starts on the hour), so every report counts against it.
      reportLimits: { windowSeconds: 3600, rejectionReports: { perCaller: 30, perSet: 70 } },
    });
    const other = h.newContainer();
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(120_000);
    const flood = await settleWithClock(
      h,
      Array.from({ length: 40 }, (_, i) =>
        reject(first.tokenId, i % 2 ? BATCH : PORTFOLIO, i % 4 < 2 ? h.invoke : other.invoke),
      ),
    );
    expect(flood.every((r) => r.statusCode < 500)).toBe(true);
    expect(flood.filter((r) => r.statusCode === 200)).toHaveLength(40);
    expect(advisorLogins(h)).toBe(2);
    const second = parseBody<TokenBody>(flood[0] as never).tokenId;

    // Past the storm guard, both callers report the new token from both containers: no login.
    await h.clock.advance(61_000);
    const again = await settleWithClock(
      h,
      Array.from({ length: 20 }, (_, i) =>
        reject(second, i % 2 ? BATCH : PORTFOLIO, i % 4 < 2 ? h.invoke : other.invoke),
      ),
    );
    expect(again.every((r) => r.statusCode === 429)).toBe(true);
    expect(advisorLogins(h)).toBe(2);

    // Each caller has sent 30 reports, its limit: the next is refused before anything is read.
    const overCaller = await reject(second, PORTFOLIO);
    expect(overCaller.statusCode).toBe(429);
    expect(parseBody(overCaller)).toMatchObject({
      details: { reason: 'REPORT_LIMIT', scope: 'caller', limit: 30 },
    });
    const lines = auditLines('reportTokenRejection');
    expect(lines.at(-1)).toMatchObject({ caller: PORTFOLIO, decision: 'REPORT_LIMITED_CALLER', status: 429 });
    expect(lines.filter((line) => line.caller === BATCH)).toHaveLength(30);
    expect(advisorLogins(h)).toBe(2);
  });
});
