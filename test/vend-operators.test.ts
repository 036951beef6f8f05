import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import type { OperatorConfig } from '../shared/config/operators.js';
import type { VendEvent } from '../shared/vend/vend-handler.js';
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

/**
 * The status-only scope: an operator principal may call GET /v1/credential-sets and nothing that returns a
 * token, writes the ledger or makes the refresher log in. All over the real parts (dynalite, the sandbox,
 * the refresher in process, one ManualClock).
 */
const startHarness = vendHarnessPerTest();
let h: VendHarness;

const ONCALL: OperatorConfig = { name: 'oncall', principalArn: 'arn:aws:iam::123456789012:role/oncall' };
const ONCALL_SESSION = 'arn:aws:sts::123456789012:assumed-role/oncall/alice';
/** The portfolio fixture caller (a consumer of uat-advisor). */
const PORTFOLIO_ROLE = 'arn:aws:iam::123456789012:role/portfolio-service';

const as = (event: VendEvent, callerArn: string) =>
  withChanges(event, { callerArn, callerAccountId: '123456789012' });
const listAs = (callerArn: string) => h.invoke(as(fixture('list-credential-sets'), callerArn));
const listed = async (callerArn: string) =>
  parseBody<{ credentialSets: { id: string }[] }>(await listAs(callerArn)).credentialSets.map((s) => s.id);

/** Every item of both tables, as stored: what "nothing was written" compares. */
async function tables(): Promise<{ tokens: unknown[]; ledger: unknown[] }> {
  const scan = async (table: string) =>
    ((await h.dynamo.client.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [])
      .map((item) => JSON.stringify(item))
      .sort();
  return { tokens: await scan(h.tokensTable), ledger: await scan(h.ledgerTable) };
}

/** The requests a consumer of uat-advisor may make, with bodies that would act (a live token, a real receipt). */
function setRequests(token: TokenBody, receipt: string): [string, VendEvent][] {
  return [
    ['GET token', fixture('get-token')],
    ['GET token (no minValiditySeconds)', withChanges(fixture('get-token'), { query: '' })],
    ['POST permits', withChanges(fixture('acquire-permits'), { body: { tokenId: token.tokenId, count: 2 } })],
    [
      'POST permits/returns',
      withChanges(fixture('return-permits'), { body: { tokenId: token.tokenId, receipt, count: 1 } }),
    ],
    [
      'POST token/rejections',
      withChanges(fixture('report-token-rejection'), {
        body: { tokenId: token.tokenId, errorCode: 'TOKEN_INVALID' },
      }),
    ],
    [
      'POST rate-limit-reports',
      withChanges(fixture('report-rate-limit'), { body: { tokenId: token.tokenId, retryAfterSeconds: 30 } }),
    ],
  ];
}

describe('an operator (status only)', () => {
  it('lists every set of the stage with its health, and no token', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const token = parseBody<TokenBody>(await getToken(h));
    const result = await listAs(ONCALL_SESSION);
    expect(result.statusCode).toBe(200);
    const body = parseBody<{ credentialSets: { id: string; health: { state: string } }[] }>(result);
    expect(body.credentialSets.map((s) => [s.id, s.health.state])).toEqual([
      ['uat-advisor', 'HEALTHY'],
      ['uat-execution', 'NO_USABLE_TOKEN'],
      ['uat-spare', 'NO_USABLE_TOKEN'],
    ]);
    expect(result.body).not.toContain(token.accessToken);
    expect(result.body).not.toContain(token.tokenId);
    const line = h.telemetry.logs.find(
      (l) => l.message === 'vend request' && l.attributes.caller === ONCALL_SESSION,
    );
    expect(line?.attributes).toMatchObject({ consumers: [], operators: ['oncall'], decision: 'LISTED' });
  });

  it('is refused every route that returns a token or writes: 403, no token, nothing written, no login', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const token = parseBody<TokenBody>(await getToken(h));
    // Past the refresher's storm guard, so that the consumer's rejection report below can re-login.
    await h.clock.advance(61_000);
    const grant = parseBody<{ receipt: string }>(
      await h.invoke(withChanges(fixture('acquire-permits'), { body: { tokenId: token.tokenId, count: 3 } })),
    );
    const before = await tables();
    const logins = advisorLogins(h);
    const refreshes = h.refreshInvoker.calls;
    for (const [route, event] of setRequests(token, grant.receipt)) {
      const result = await h.invoke(as(event, ONCALL_SESSION));
      expect(result.statusCode, route).toBe(403);
      expect(errorBodyProblems(result), route).toEqual([]);
      expect(parseBody(result), route).toMatchObject({
        errorCode: 'INSUFFICIENT_PERMISSIONS',
        errorMessage: `this caller may read credential set "uat-advisor"'s status only (GET /v1/credential-sets)`,
        details: { credentialSet: 'uat-advisor' },
      });
      expect(result.body, route).not.toContain(token.accessToken);
    }
    expect(await tables()).toEqual(before);
    expect(advisorLogins(h)).toBe(logins);
    expect(h.refreshInvoker.calls).toBe(refreshes);

    // The same requests from the consumer act: the refusals above were the operator's, not the bodies'.
    const statuses = [];
    for (const [, event] of setRequests(token, grant.receipt))
      statuses.push((await h.invoke(event)).statusCode);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 204]);
    expect(await tables()).not.toEqual(before);
    expect(advisorLogins(h)).toBe(logins + 1);
  });

  it('with credentialSets sees only those; a set outside them is 403 as for anyone, an unknown id 404', async () => {
    h = await startHarness({ operators: [{ ...ONCALL, credentialSets: ['uat-execution'] }] });
    expect(await listed(ONCALL_SESSION)).toEqual(['uat-execution']);
    const other = await h.invoke(as(fixture('get-token'), ONCALL_SESSION));
    expect(other.statusCode).toBe(403);
    expect(parseBody(other)).toMatchObject({
      errorMessage: 'this caller may not use credential set "uat-advisor"',
      details: { credentialSet: 'uat-advisor' },
    });
    const unknown = await h.invoke(
      as(withChanges(fixture('get-token'), { path: '/v1/credential-sets/uat-nope/token' }), ONCALL_SESSION),
    );
    expect(unknown.statusCode).toBe(404);
    expect(parseBody(unknown)).toMatchObject({
      errorMessage: 'no credential set "uat-nope"',
      details: { credentialSet: 'uat-nope' },
    });
  });

  it('a principal that is consumer and operator keeps its consumer rights and sees the status of all its sets', async () => {
    h = await startHarness({
      operators: [{ name: 'portfolio-oncall', principalArn: PORTFOLIO_ROLE }],
    });
    // The fixture's portfolio session: a consumer of uat-advisor only, an operator of every set.
    const session = fixture('get-token').requestContext.authorizer.iam.userArn;
    expect(await listed(session)).toEqual(['uat-advisor', 'uat-execution', 'uat-spare']);
    const own = await getToken(h);
    expect(own.statusCode).toBe(200);
    expect(parseBody<TokenBody>(own).credentialSet).toBe('uat-advisor');
    const before = await tables();
    const statusOnly = await h.invoke(
      withChanges(fixture('get-token'), { path: '/v1/credential-sets/uat-execution/token' }),
    );
    expect(statusOnly.statusCode).toBe(403);
    expect(parseBody(statusOnly)).toMatchObject({ errorCode: 'INSUFFICIENT_PERMISSIONS' });
    expect(statusOnly.body).not.toContain('accessToken');
    expect(await tables()).toEqual(before);
  });

  it('a principal that is neither is still refused the list (403), operators configured or not', async () => {
    h = await startHarness({ operators: [ONCALL] });
    const result = await listAs('arn:aws:sts::123456789012:assumed-role/someone-else/x');
    expect(result.statusCode).toBe(403);
    expect(parseBody(result)).toMatchObject({ errorCode: 'INSUFFICIENT_PERMISSIONS' });
    // The same role name in another account is not the operator.
    const foreign = await h.invoke(
      withChanges(fixture('list-credential-sets'), {
        callerArn: 'arn:aws:sts::999988887777:assumed-role/oncall/alice',
        callerAccountId: '999988887777',
      }),
    );
    expect(foreign.statusCode).toBe(403);
  });
});

describe('the list (status) route reads fresh state, not the warm cache', () => {
  type Health = { state: string; lastError: { code: string } | null; consecutiveFailures: number };
  const healthOf = async (callerArn: string) =>
    parseBody<{ credentialSets: { id: string; health: Health }[] }>(
      await listAs(callerArn),
    ).credentialSets.find((s) => s.id === 'uat-advisor')?.health;

  /** Warm the vend path's cache, then fail a login in the refresher (the vendor rejects a new password). */
  async function failALoginAfterWarmCache(): Promise<void> {
    const token = parseBody<TokenBody>(await getToken(h));
    // Past the refresher's storm guard (one attempt per set per minute).
    await h.clock.advance(61_000);
    expect((await getToken(h)).statusCode).toBe(200); // the cache holds the healthy state, read now
    expect(await healthOf(ONCALL_SESSION)).toMatchObject({ state: 'HEALTHY', lastError: null });
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'rotated-wrong' }, 'v2');
    const rejectedBefore = h.sandbox.stats().logins['uat-advisor']?.failures ?? 0;
    await h.refresher.refreshOne({
      credentialSetId: 'uat-advisor',
      reason: 'TOKEN_REJECTED',
      rejectedTokenId: token.tokenId,
    });
    expect(h.sandbox.stats().logins['uat-advisor']?.failures).toBe(rejectedBefore + 1);
  }

  it('shows a login failure at once, where the cache (within its version-check second) still has the old state', async () => {
    h = await startHarness({ operators: [ONCALL] });
    await failALoginAfterWarmCache();
    await h.clock.advance(400);
    const reads = h.store.reads;
    const versionReads = h.store.versionReads;
    expect(await healthOf(ONCALL_SESSION)).toMatchObject({
      state: 'DEGRADED',
      lastError: { code: 'INVALID_CREDENTIALS' },
      consecutiveFailures: 1,
    });
    // Cheap: one consistent GetItem per listed set (the operator lists three), no version check.
    expect(h.store.reads - reads).toBe(3);
    expect(h.store.versionReads).toBe(versionReads);
  });

  it('with version checks off (entries live their 30 s TTL), still at once', async () => {
    h = await startHarness({ operators: [ONCALL], vend: { versionCheckMs: 0 } });
    await failALoginAfterWarmCache();
    await h.clock.advance(5_000);
    expect(await healthOf(ONCALL_SESSION)).toMatchObject({
      state: 'DEGRADED',
      lastError: { code: 'INVALID_CREDENTIALS' },
    });
    // A consumer's list is fresh too (it is the same route).
    const session = fixture('get-token').requestContext.authorizer.iam.userArn;
    expect(await healthOf(session)).toMatchObject({ state: 'DEGRADED' });
  });
});
