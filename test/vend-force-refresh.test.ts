import { describe, expect, it } from 'vitest';
import type { OperatorConfig } from '../shared/config/operators.js';
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

/**
 * An operator's forced re-login (POST /v1/credential-sets/{id}/refresh, `token-broker refresh`) and the cause
 * every 503 TOKEN_UNAVAILABLE carries. Over the real parts: dynalite, the sandbox over HTTP, the refresher in
 * process, one ManualClock.
 */
const startHarness = vendHarnessPerTest();
let h: VendHarness;

const ACCOUNT = '123456789012';
const ONCALL: OperatorConfig = {
  name: 'oncall',
  principalArn: `arn:aws:iam::${ACCOUNT}:role/oncall`,
  refresh: true,
};
const BOARD: OperatorConfig = { name: 'board', principalArn: `arn:aws:iam::${ACCOUNT}:role/board` };
const ONCALL_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/oncall/alice`;
const BOARD_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/board/dashboard`;
/** Consumers of uat-advisor in the fixtures: a role (the fixtures' default caller) and an IAM user. */
const PORTFOLIO_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/portfolio-service/s`;
const BATCH_USER = `arn:aws:iam::${ACCOUNT}:user/ops/batch-runner`;

const as = (event: VendEvent, callerArn: string) =>
  withChanges(event, { callerArn, callerAccountId: ACCOUNT });
const refreshEvent = (setId = 'uat-advisor', body?: unknown) =>
  withChanges(fixture('acquire-permits'), {
    path: `/v1/credential-sets/${setId}/refresh`,
    body: body ?? '',
  });
const refreshAs = (callerArn: string, setId?: string, body?: unknown) =>
  h.invoke(as(refreshEvent(setId, body), callerArn));
const tokenAs = (callerArn: string) => h.invoke(as(fixture('get-token'), callerArn));

interface RefreshBody {
  credentialSet: string;
  tokenId: string;
  expiresAt: number;
  expiresInSeconds: number;
  loggedIn: boolean;
  replacedTokenId?: string;
}

const vendLines = () =>
  h.telemetry.logs.filter((log) => log.message === 'vend request').map((log) => log.attributes);

describe('POST /v1/credential-sets/{id}/refresh', () => {
  it('replaces the current token for an operator with refresh, and answers its id and expiry, never the token', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const before = parseBody<TokenBody>(await getToken(h));
    expect(advisorLogins(h)).toBe(1);
    await h.clock.advance(61_000); // past the refresher's one attempt a minute
    const result = await refreshAs(ONCALL_SESSION);
    expect(result.statusCode).toBe(200);
    const body = parseBody<RefreshBody>(result);
    expect(body).toMatchObject({
      credentialSet: 'uat-advisor',
      loggedIn: true,
      replacedTokenId: before.tokenId,
    });
    expect(body.tokenId).not.toBe(before.tokenId);
    expect(body.expiresInSeconds).toBeGreaterThan(3600);
    expect(result.body).not.toContain(before.accessToken.slice(0, 20));
    expect(result.body).not.toContain('eyJ');
    expect(advisorLogins(h)).toBe(2);
    // Consumers get the new token at once.
    expect(parseBody<TokenBody>(await getToken(h)).tokenId).toBe(body.tokenId);
    // Audited like a vend: the request line names the caller, the route, the decision and both token ids.
    expect(vendLines()).toContainEqual(
      expect.objectContaining({
        route: 'forceRefresh',
        caller: ONCALL_SESSION,
        operators: ['oncall'],
        credentialSet: 'uat-advisor',
        decision: 'REFRESHED',
        tokenId: body.tokenId,
        rejectedTokenId: before.tokenId,
        status: 200,
      }),
    );
  });

  it('logs in once however many ask at once, from two containers: every answer names the same new token', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const before = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(61_000);
    const other = h.newContainer();
    const requests = Array.from({ length: 10 }, (_, i) =>
      (i % 2 === 0 ? h.invoke : other.invoke)(as(refreshEvent(), ONCALL_SESSION)),
    );
    const results = await settleWithClock(h, requests);
    expect(results.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    const bodies = results.map((r) => parseBody<RefreshBody>(r));
    expect(new Set(bodies.map((b) => b.tokenId)).size).toBe(1);
    expect(bodies[0]?.tokenId).not.toBe(before.tokenId);
    // `loggedIn`: a login was made for this request or one it joined in its container; never without a login.
    expect(bodies.some((b) => b.loggedIn)).toBe(true);
    expect(advisorLogins(h)).toBe(2);
    expect(h.sandbox.stats().loginRequests).toBe(2);
  });

  it('is refused to a consumer of the set, a status-only operator, and outside the operator’s sets; nothing logs in', async () => {
    h = await startHarness({ operators: [{ ...ONCALL, credentialSets: ['uat-execution'] }, BOARD] });
    await getToken(h);
    await h.clock.advance(61_000);
    const refusals: [string, VendEvent][] = [
      ['consumer (role)', as(refreshEvent(), PORTFOLIO_SESSION)],
      ['consumer (user)', as(refreshEvent(), BATCH_USER)],
      ['status-only operator', as(refreshEvent(), BOARD_SESSION)],
      ['operator of another set', as(refreshEvent(), ONCALL_SESSION)],
    ];
    for (const [who, event] of refusals) {
      const result = await h.invoke(event);
      expect(result.statusCode, who).toBe(403);
      expect(errorBodyProblems(result), who).toEqual([]);
      expect(parseBody(result), who).toMatchObject({
        errorCode: 'INSUFFICIENT_PERMISSIONS',
        errorMessage:
          'this caller may not force a re-login of credential set "uat-advisor": only an operator entry with "refresh": true may',
        details: { credentialSet: 'uat-advisor' },
      });
    }
    const unknown = await refreshAs(ONCALL_SESSION, 'uat-nope');
    expect(unknown.statusCode).toBe(404);
    expect(parseBody(unknown)).toMatchObject({ errorMessage: 'no credential set "uat-nope"' });
    // An id no set can have (the configuration's rule) is not echoed.
    const odd = await refreshAs(ONCALL_SESSION, 'Uat_Advisor');
    expect(odd.statusCode).toBe(404);
    expect(parseBody(odd)).toMatchObject({ errorMessage: 'no credential set (an id no set can have)' });
    expect(parseBody(odd)).not.toHaveProperty('details');
    const withField = await refreshAs(ONCALL_SESSION, 'uat-execution', { force: true });
    expect(withField.statusCode).toBe(400);
    expect(parseBody(withField)).toMatchObject({ errorCode: 'INVALID_VALUE', details: { field: 'force' } });
    expect(advisorLogins(h)).toBe(1);
    expect(h.sandbox.stats().loginRequests).toBe(1);
    // The operator's own set, with an empty JSON object as the body: allowed.
    expect((await refreshAs(ONCALL_SESSION, 'uat-execution', {})).statusCode).toBe(200);
  });

  it('answers a token less than a minute old as it is (the refresher’s one attempt a minute), and logs in after', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const first = parseBody<TokenBody>(await getToken(h));
    await h.clock.advance(20_000);
    const soon = await refreshAs(ONCALL_SESSION);
    expect(soon.statusCode).toBe(200);
    const fresh = parseBody<RefreshBody & { refreshedAt: string }>(soon);
    expect(fresh).toMatchObject({ tokenId: first.tokenId, loggedIn: false });
    expect(fresh).not.toHaveProperty('replacedTokenId');
    expect(Date.parse(fresh.refreshedAt)).toBe(h.clock.now() - 20_000);
    expect(advisorLogins(h)).toBe(1);
    expect(vendLines().at(-1)).toMatchObject({ route: 'forceRefresh', decision: 'REFRESHED_ELSEWHERE' });
    await h.clock.advance(40_000);
    const later = await refreshAs(ONCALL_SESSION);
    expect(later.statusCode).toBe(200);
    expect(parseBody<RefreshBody>(later)).toMatchObject({ loggedIn: true, replacedTokenId: first.tokenId });
    expect(advisorLogins(h)).toBe(2);
  });

  it('after put-credentials, logs in with the new password once a minute has passed, not after the 15-minute cooldown', async () => {
    h = await startHarness({ operators: [ONCALL] });
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'wrong' }, 'v2');
    expect((await getToken(h)).statusCode).toBe(503);
    const refused = await refreshAs(ONCALL_SESSION);
    expect(refused.statusCode).toBe(503);
    expect(parseBody(refused)).toMatchObject({
      errorCode: 'TOKEN_UNAVAILABLE',
      details: { cause: { code: 'INVALID_CREDENTIALS' } },
    });
    h.credentials.set(
      'broker/uat-advisor',
      { username: 'uat-advisor', password: 'uat-advisor-sandbox-pw' },
      'v3',
    );
    // The refresher's one attempt a minute per set holds for a new secret version too; its 15-minute cooldown not.
    await h.clock.advance(61_000);
    const fixed = await refreshAs(ONCALL_SESSION);
    expect(fixed.statusCode).toBe(200);
    expect(parseBody<RefreshBody>(fixed)).toMatchObject({ loggedIn: true });
    expect((await getToken(h)).statusCode).toBe(200);
  });
});

describe('503 TOKEN_UNAVAILABLE keeps its cause', () => {
  it('a wrong password: every caller, in every container, sees INVALID_CREDENTIALS for as long as it holds', async () => {
    h = await startHarness();
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'wrong' }, 'v2');
    const other = h.newContainer();
    const answers = [
      await tokenAs(PORTFOLIO_SESSION), // the first: the refresher's own answer
      await tokenAs(BATCH_USER), // another caller, the same container: its quiet period
      await other.invoke(as(fixture('get-token'), BATCH_USER)), // another container: the recorded failure
    ];
    await h.clock.advance(600_000); // ten minutes on, still inside the 15-minute cooldown
    answers.push(await tokenAs(PORTFOLIO_SESSION), await other.invoke(as(fixture('get-token'), BATCH_USER)));
    for (const [i, result] of answers.entries()) {
      expect(result.statusCode, `answer ${i}`).toBe(503);
      expect(errorBodyProblems(result), `answer ${i}`).toEqual([]);
      expect(parseBody(result), `answer ${i}`).toMatchObject({
        errorCode: 'TOKEN_UNAVAILABLE',
        errorMessage:
          'credential set "uat-advisor" has no usable token: the vendor rejected the set\'s username or password (INVALID_CREDENTIALS)',
        details: {
          credentialSet: 'uat-advisor',
          cause: {
            code: 'INVALID_CREDENTIALS',
            reason: "the vendor rejected the set's username or password",
          },
        },
      });
      expect(Number(result.headers['retry-after']), `answer ${i}`).toBeGreaterThan(0);
    }
    expect(h.sandbox.stats().loginRequests).toBe(1);
    expect(h.telemetry.dump()).not.toContain('"wrong"');
  });

  it('a re-login that outlasts the wait says so', async () => {
    h = await startHarness({ sandbox: { latencyMs: 500 }, vend: { refreshWaitMs: 1_000 } });
    const pending = getToken(h);
    while (h.clock.pendingSleepers === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    await h.clock.advance(1_000);
    const waited = await pending;
    expect(waited.statusCode).toBe(503);
    expect(parseBody(waited)).toMatchObject({ details: { cause: { code: 'REFRESH_IN_PROGRESS' } } });
    // The login goes on; it ends before the file's DynamoDB closes.
    while (advisorLogins(h) === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await getToken(h)).statusCode).toBe(200);
  });
});
