import { readFileSync } from 'node:fs';
import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { serveFunctionUrl } from '../local/function-url-server.js';
import { type LocalCaller, SigV4Verifier } from '../local/sigv4-verifier.js';
import { systemClock } from '../shared/clock.js';
import type { OperatorConfig } from '../shared/config/operators.js';
import { SPENT_PER_CALLER } from '../shared/ledger/receipts.js';
import {
  permitRequestBody,
  permitReturnBody,
  rateLimitReportBody,
  tokenRejectionBody,
} from '../shared/vend/request-bodies.js';
import type { VendResult } from '../shared/vend/responses.js';
import { ROUTES } from '../shared/vend/router.js';
import type { VendEvent } from '../shared/vend/vend-handler.js';
import { fixture, parseBody, withChanges } from './support/vend-harness.js';
import { requestOf, VendOpenApi } from './support/vend-openapi.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

/**
 * docs/vend-api.openapi.yaml against the real vend handler (dynalite, the vendor sandbox over HTTP, the real
 * refresher and ledger, one ManualClock): a table of requests producing each documented status of each route,
 * every answer validated (status, headers, JSON body) against the document with Ajv (JSON Schema 2020-12);
 * and the converse, every (route, status) of the document answered at least once here.
 */
const api = new VendOpenApi();
const startHarness = vendHarnessPerTest();

/** `operationId status` of every answer validated so far in this file. */
const answered = new Set<string>();
/** The same, with the body schema alternative and the errorCode each answer validated as. */
const variants = new Set<string>();

const ACCOUNT = '123456789012';
const STRANGER = `arn:aws:sts::${ACCOUNT}:assumed-role/analytics-sandbox/jane`;
const BATCH = `arn:aws:iam::${ACCOUNT}:user/ops/batch-runner`;
const ONCALL: OperatorConfig = { name: 'oncall', principalArn: `arn:aws:iam::${ACCOUNT}:role/oncall` };
const ONCALL_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/oncall/alice`;
/** An operator who may force re-logins (`refresh: true`), under another role. */
const LEAD: OperatorConfig = {
  name: 'lead',
  principalArn: `arn:aws:iam::${ACCOUNT}:role/lead`,
  refresh: true,
};
const LEAD_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/lead/bob`;
/** POST refresh of uat-advisor, as the operator with `refresh`; `body` a JSON body (default: none). */
const refreshAs = (callerArn: string, body?: unknown) =>
  as(
    withChanges(fixture('acquire-permits'), {
      path: '/v1/credential-sets/uat-advisor/refresh',
      body: body ?? '',
    }),
    callerArn,
  );
/** The reporting service (a consumer of uat-execution, through a role with a path). */
const REPORTING_SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/reporting-service/nightly`;

interface SetList {
  credentialSets: {
    health: {
      state: string;
      lastError: unknown;
      rateLimitedUntil: unknown;
      rejectionsOfSecretVersion?: number;
    };
    quota: { class?: string }[] | null;
  }[];
}

const as = (event: VendEvent, callerArn: string) =>
  withChanges(event, { callerArn, callerAccountId: ACCOUNT });
const onSet = (event: VendEvent, setId: string) =>
  withChanges(event, { path: event.rawPath.replace('/uat-advisor/', `/${setId}/`) });
const withBody = (name: string, body: unknown) => withChanges(fixture(name), { body });
const tooLarge = (name: string) => withBody(name, { tokenId: '0000000000000000', pad: 'x'.repeat(9000) });

/**
 * Sends the request, expects `status`, and validates the answer against the document; for a 2xx, the request
 * body against the operation's requestBody schema too. Never prints a body (a token answer holds a token).
 */
async function check(
  invoke: (event: VendEvent) => Promise<VendResult>,
  name: string,
  event: VendEvent,
  status: number,
): Promise<VendResult> {
  const result = await invoke(event);
  expect(result.statusCode, name).toBe(status);
  expect(api.answerProblems(requestOf(event), result), name).toEqual([]);
  const located = api.locate(requestOf(event), result.statusCode);
  answered.add(located.key);
  const variant = api.variantOf(requestOf(event), result);
  if (variant) variants.add(variant);
  if (status < 300 && located.kind === 'operation' && event.body) {
    expect(api.requestProblems(located.operation, JSON.parse(event.body)), name).toEqual([]);
  }
  return result;
}

describe('docs/vend-api.openapi.yaml', () => {
  it("is OpenAPI 3.1, lists exactly the router's routes, and every schema compiles in strict mode", () => {
    expect(api.document.openapi).toMatch(/^3\.1\.\d+$/);
    expect(api.structureProblems()).toEqual([]);
    const documented = api.operations.map((op) => [op.operationId, op.method, op.path]).sort();
    const routed = ROUTES.map((route) => [route.name, route.method, `/${route.pattern.join('/')}`]).sort();
    expect(documented).toEqual(routed);
    expect(api.compileEverySchema()).toBeGreaterThan(50);
    const schemes = (api.document.components as { securitySchemes: Record<string, Record<string, string>> })
      .securitySchemes;
    expect(schemes.awsSigV4).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
    expect(api.document.security).toEqual([{ awsSigV4: [] }]);
  });

  it('has the request bodies the handler validates with (its zod schemas), field by field', () => {
    const handlerBodies: Record<string, z.ZodType> = {
      acquirePermits: permitRequestBody(),
      returnPermits: permitReturnBody(),
      reportTokenRejection: tokenRejectionBody(),
      reportRateLimit: rateLimitReportBody(),
    };
    const withBodies = api.operations.filter((op) => op.requestSchema !== undefined);
    expect(withBodies.map((op) => op.operationId).sort()).toEqual(Object.keys(handlerBodies).sort());
    for (const op of withBodies) {
      const fromZod = z.toJSONSchema(handlerBodies[op.operationId] as z.ZodType, { io: 'input' }) as {
        properties: Record<string, unknown>;
        required: string[];
        additionalProperties: unknown;
      };
      const documented = api.resolveSchema(op.requestSchema);
      expect([documented.required, documented.additionalProperties], op.operationId).toEqual([
        fromZod.required,
        fromZod.additionalProperties,
      ]);
      const properties = documented.properties as Record<string, unknown>;
      expect(Object.keys(properties).sort(), op.operationId).toEqual(Object.keys(fromZod.properties).sort());
      for (const [name, schema] of Object.entries(fromZod.properties)) {
        expect(api.resolveSchema(properties[name]), `${op.operationId}.${name}`).toEqual(schema);
      }
    }
    // The rate-limit report's refinements, which JSON Schema from zod leaves out: the document has them too.
    const reportOp = withBodies.find((op) => op.operationId === 'reportRateLimit');
    if (!reportOp) throw new Error('no reportRateLimit');
    const tokenId = '0123456789abcdef';
    for (const body of [
      { tokenId },
      { tokenId, remaining: 0 },
      { tokenId, retryAfterSeconds: 1, remaining: 0 },
    ]) {
      expect(rateLimitReportBody().safeParse(body).success, JSON.stringify(body)).toBe(false);
      expect(api.requestProblems(reportOp, body), JSON.stringify(body)).not.toEqual([]);
    }
    for (const body of [
      { tokenId, retryAfterSeconds: 1 },
      { tokenId, remaining: 0, reset: 1 },
    ]) {
      expect(rateLimitReportBody().safeParse(body).success, JSON.stringify(body)).toBe(true);
      expect(api.requestProblems(reportOp, body), JSON.stringify(body)).toEqual([]);
    }
  });

  it('says what docs/vend-api.md says: routes, bodies, answer fields, and status with errorCode', () => {
    const prose = readFileSync(new URL('../docs/vend-api.md', import.meta.url), 'utf8');
    /** `{a, b?, c: X\|Y, d: {e, f}}` → [['a', false], ['b', true], ['c', false], ['d', false]]. */
    const fields = (braced: string): [string, boolean][] => {
      const names: [string, boolean][] = [];
      let depth = 0;
      let part = '';
      for (const char of `${braced.slice(1, -1)},`) {
        if (char === '{' || char === '[') depth++;
        if (char === '}' || char === ']') depth--;
        if (char === ',' && depth === 0) {
          const name = (part.split(':')[0] ?? '').trim();
          names.push([name.replace(/\?$/, ''), name.endsWith('?')]);
          part = '';
        } else part += char;
      }
      return names.sort();
    };
    const schemaFields = (schema: unknown): [string, boolean][] => {
      const resolved = api.resolveSchema(schema);
      const all = resolved.allOf as unknown[] | undefined;
      const own = all ? api.resolveSchema(all[0]) : resolved;
      const required = [...((own.required as string[]) ?? []), ...((resolved.required as string[]) ?? [])];
      const names = [
        ...Object.keys(own.properties as object),
        ...(all ? Object.keys((resolved.properties as object) ?? {}) : []),
      ];
      return names.map((name): [string, boolean] => [name, !required.includes(name)]).sort();
    };
    // The route table (the first one): route, body, answer; `\|` is a `|` inside a cell.
    const routeTable = prose.slice(0, prose.indexOf('## Who may call what'));
    const rows = [
      ...routeTable.matchAll(/^\| `(GET|POST) (\/v1\/[^`?]*)[^`]*` *\| ((?:\\\||[^|])*?) *\| (.*)\|$/gm),
    ];
    const routes = rows.map(([, method, path]) => `${method} ${path}`).sort();
    expect(routes).toEqual(api.operations.map((op) => `${op.method} ${op.path}`).sort());
    let comparedAnswers = 0;
    for (const [, method, path, body, success] of rows) {
      const op = api.operations.find((o) => o.method === method && o.path === path);
      if (!op) throw new Error(`${method} ${path}: not in the document`);
      const where = `${method} ${path}`;
      if (body === '—') expect(op.requestSchema, where).toBeUndefined();
      else
        expect(fields(body?.replaceAll('\\|', '|').replaceAll('`', '') ?? ''), where).toEqual(
          schemaFields(op.requestSchema),
        );
      const answer = /^(\d{3}) `(\{.*?\})`(?: |;|$)/.exec(success?.trim() ?? '');
      if (answer) {
        comparedAnswers++;
        const [, status, braced] = answer;
        const media = (api.resolveResponse(op, status ?? '').content as Record<string, { schema: unknown }>)[
          'application/json'
        ];
        expect(fields(braced?.replaceAll('\\|', '|') ?? ''), `${where} ${status}`).toEqual(
          schemaFields(media?.schema),
        );
      }
    }
    // The list, the token, the grant and the give-back spell their fields out; the rest say it in words.
    expect(comparedAnswers).toBe(4);
    const errorRows = [...prose.matchAll(/^\| (\d{3}) +\| ([A-Z_, ]+?) +\|/gm)];
    const proseCodes = new Set(
      errorRows.flatMap(([, status, codes]) => (codes ?? '').split(', ').map((code) => `${status} ${code}`)),
    );
    const documentedCodes = new Set(
      api
        .documentedVariants()
        .filter((variant) => !variant.endsWith('(no body)'))
        .map((variant) => variant.split(' '))
        .filter((parts) => parts.length === 4 && parts[3] !== '-')
        .map((parts) => `${parts[1]} ${parts[3]}`),
    );
    expect([...proseCodes].sort()).toEqual([...documentedCodes].sort());
  });

  it('refuses wrong answers: the checks cannot pass vacuously', async () => {
    const h = await startHarness();
    const event = fixture('get-token');
    const right = await check(h.invoke, 'token', event, 200);
    const body = parseBody<Record<string, unknown>>(right);
    const { accessToken: _token, ...withoutToken } = body;
    const wrong = (change: Partial<VendResult>): VendResult => ({ ...right, ...change });
    const cases: [string, VendResult, string][] = [
      [
        'no accessToken',
        wrong({ body: JSON.stringify(withoutToken) }),
        "must have required property 'accessToken'",
      ],
      ['an extra field', wrong({ body: JSON.stringify({ ...body, extra: 1 }) }), 'unevaluated properties'],
      ['a wrong type', wrong({ body: JSON.stringify({ ...body, expiresAt: 'soon' }) }), 'must be integer'],
      [
        'no Cache-Control',
        wrong({ headers: { 'content-type': 'application/json' } }),
        'Cache-Control missing',
      ],
      [
        'an undocumented header',
        wrong({ headers: { ...right.headers, 'x-powered-by': 'x' } }),
        'x-powered-by is not in the document',
      ],
      ['an undocumented status', wrong({ statusCode: 418 }), 'status not in the document'],
      [
        'a 429 where the route has none',
        wrong({ statusCode: 429, headers: { ...right.headers, 'retry-after': '1' } }),
        'status not in the document',
      ],
    ];
    for (const [name, result, expected] of cases) {
      const problems = api.answerProblems(requestOf(event), result);
      expect(
        problems.some((problem) => problem.includes(expected)),
        `${name}: ${problems.join('; ')}`,
      ).toBe(true);
    }
    const permits = fixture('acquire-permits');
    const refused = await check(
      h.invoke,
      'count above the smallest limit',
      withBody('acquire-permits', { tokenId: body.tokenId, count: 51 }),
      400,
    );
    const refusedBody = parseBody<Record<string, unknown>>(refused);
    const noRetryAfter = {
      ...refused,
      statusCode: 503,
      body: JSON.stringify({
        ...refusedBody,
        errorStatus: 503,
        errorCode: 'LEDGER_UNAVAILABLE',
        details: undefined,
      }),
    };
    expect(api.answerProblems(requestOf(permits), noRetryAfter).join('; ')).toContain('Retry-After missing');
    const wrongCode = {
      ...refused,
      body: JSON.stringify({ ...refusedBody, errorCode: 'RATE_LIMIT_EXCEEDED' }),
    };
    expect(api.answerProblems(requestOf(permits), wrongCode).join('; ')).toContain(
      '/errorCode must be equal to one of the allowed values',
    );
  });

  it('matches every answer of every route but the outages: 2xx, 400, 403, 404, 405, 409, 410, 413, 429', async () => {
    const h = await startHarness({
      operators: [ONCALL, LEAD],
      // A permit class with its paths, so that quotas list class windows, a grant names its class, and the token
      // answer lists the class's path patterns.
      setOverrides: {
        rateLimits: {
          classes: {
            reports: {
              paths: ['/reports/**', '/users/*/*/reports/*'],
              limits: [{ limit: 5, windowSeconds: 60 }],
            },
          },
        },
      },
      reportLimits: {
        rateLimitReports: { perCaller: 2, perSet: 3 },
        rejectionReports: { perCaller: 3, perSet: 10 },
      },
    });
    const send = (name: string, event: VendEvent, status: number) => check(h.invoke, name, event, status);

    // GET /v1/credential-sets: before any login (nulls), and after.
    await send('list before any token', fixture('list-credential-sets'), 200);
    const token = parseBody<{ tokenId: string; classes: unknown }>(
      await send('token', fixture('get-token'), 200),
    );
    expect(token.classes).toEqual([
      { class: 'reports', paths: ['/reports/**', '/users/*/*/reports/*'], learned: false },
    ]);
    await send('token, default validity', withChanges(fixture('get-token'), { query: '' }), 200);
    await send('list', fixture('list-credential-sets'), 200);
    await send('list as operator', as(fixture('list-credential-sets'), ONCALL_SESSION), 200);
    await send('list as stranger', as(fixture('list-credential-sets'), STRANGER), 403);
    await send('list with POST', withChanges(fixture('list-credential-sets'), { method: 'POST' }), 405);

    // GET token
    await send(
      'token, bad minValiditySeconds',
      withChanges(fixture('get-token'), { query: 'minValiditySeconds=x' }),
      400,
    );
    await send(
      'token, minValiditySeconds above the cap',
      withChanges(fixture('get-token'), { query: 'minValiditySeconds=3601' }),
      400,
    );
    await send('token as stranger', as(fixture('get-token'), STRANGER), 403);
    await send('token as operator', as(fixture('get-token'), ONCALL_SESSION), 403);
    await send('token of a set not the caller’s', onSet(fixture('get-token'), 'uat-spare'), 403);
    await send('token of an unknown set', onSet(fixture('get-token'), 'no-such-set'), 404);
    await send('token with POST', withChanges(fixture('get-token'), { method: 'POST' }), 405);

    // POST permits
    const tokenId = token.tokenId;
    const grant = parseBody<{ receipt: string }>(
      await send('permits', withBody('acquire-permits', { tokenId, count: 2 }), 200),
    );
    const foreignGrant = parseBody<{ receipt: string }>(
      await send(
        'permits for the foreign give-back',
        withBody('acquire-permits', { tokenId, count: 1 }),
        200,
      ),
    );
    const expiringGrant = parseBody<{ receipt: string }>(
      await send('permits to let expire', withBody('acquire-permits', { tokenId, count: 1 }), 200),
    );
    await send('permits, count not a number', withBody('acquire-permits', { tokenId, count: 'many' }), 400);
    await send('permits, no tokenId', withBody('acquire-permits', { count: 1 }), 400);
    await send(
      'permits, not a live token',
      withBody('acquire-permits', { tokenId: 'fedcba9876543210', count: 1 }),
      400,
    );
    await send(
      'permits, text content type',
      withChanges(withBody('acquire-permits', { tokenId, count: 1 }), {
        headers: { 'content-type': 'text/plain' },
      }),
      400,
    );
    await send('permits as stranger', as(withBody('acquire-permits', { tokenId, count: 1 }), STRANGER), 403);
    await send(
      'permits as operator',
      as(withBody('acquire-permits', { tokenId, count: 1 }), ONCALL_SESSION),
      403,
    );
    await send(
      'permits of an unknown set',
      onSet(withBody('acquire-permits', { tokenId, count: 1 }), 'nope'),
      404,
    );
    await send('permits with GET', withChanges(fixture('acquire-permits'), { method: 'GET' }), 405);
    await send('permits, body too large', tooLarge('acquire-permits'), 413);
    const classGrant = await send(
      'permits of a class',
      withBody('acquire-permits', { tokenId, count: 1, class: 'reports' }),
      200,
    );
    expect(parseBody(classGrant)).toMatchObject({ class: 'reports' });
    await send(
      'permits of a class the set lacks',
      withBody('acquire-permits', { tokenId, count: 1, class: 'rebalancing' }),
      400,
    );
    await send('permits, the rest of the minute', withBody('acquire-permits', { tokenId, count: 45 }), 200);
    await send('permits denied', withBody('acquire-permits', { tokenId, count: 1 }), 429);

    // POST permits/returns
    await send('return', withBody('return-permits', { tokenId, count: 2, receipt: grant.receipt }), 200);
    await send(
      'return again',
      withBody('return-permits', { tokenId, count: 2, receipt: grant.receipt }),
      409,
    );
    await send(
      'return, not a receipt',
      withBody('return-permits', { tokenId, count: 1, receipt: 'r1.nothing' }),
      400,
    );
    await send('return, no receipt', withBody('return-permits', { tokenId, count: 1 }), 400);
    const receipt = foreignGrant.receipt;
    await send('return, count a string', withBody('return-permits', { tokenId, count: 'x', receipt }), 400);
    await send('return, count 0', withBody('return-permits', { tokenId, count: 0, receipt }), 400);
    await send(
      "return of another caller's grant",
      as(withBody('return-permits', { tokenId, count: 1, receipt: foreignGrant.receipt }), BATCH),
      403,
    );
    await send(
      'return as stranger',
      as(withBody('return-permits', { tokenId, count: 1, receipt: foreignGrant.receipt }), STRANGER),
      403,
    );
    await send(
      'return of an unknown set',
      onSet(withBody('return-permits', { tokenId, count: 1, receipt: foreignGrant.receipt }), 'nope'),
      404,
    );
    await send('return with GET', withChanges(fixture('return-permits'), { method: 'GET' }), 405);
    await send('return, body too large', tooLarge('return-permits'), 413);
    await h.clock.advance(10_000);
    await send(
      'return, receipt expired',
      withBody('return-permits', { tokenId, count: 1, receipt: expiringGrant.receipt }),
      410,
    );

    // POST token/rejections: past the refresher's storm guard, so the first report re-logs in.
    await h.clock.advance(61_000);
    const reject = (id: string) =>
      withBody('report-token-rejection', { tokenId: id, errorCode: 'TOKEN_INVALID' });
    const relogged = parseBody<{ tokenId: string; reloggedIn: boolean }>(
      await send('rejection of the current token', reject(tokenId), 200),
    );
    expect(relogged.reloggedIn).toBe(true);
    const rejected = await send('rejection of the new token, too soon', reject(relogged.tokenId), 429);
    expect(parseBody(rejected)).toMatchObject({ details: { reason: 'RELOGIN_LIMIT' } });
    await send('rejection of the previous token', reject(tokenId), 200);
    const limited = await send('rejection over the report limit', reject(tokenId), 429);
    expect(parseBody(limited)).toMatchObject({ details: { reason: 'REPORT_LIMIT', scope: 'caller' } });
    await send(
      'rejection, TOKEN_MISSING',
      withBody('report-token-rejection', { tokenId, errorCode: 'TOKEN_MISSING' }),
      400,
    );
    await send('rejection, no errorCode', withBody('report-token-rejection', { tokenId }), 400);
    await send(
      'rejection, tokenId not a token id',
      withBody('report-token-rejection', { tokenId: 'x', errorCode: 'TOKEN_INVALID' }),
      400,
    );
    await send('rejection as stranger', as(reject(tokenId), STRANGER), 403);
    await send('rejection of an unknown set', onSet(reject(tokenId), 'nope'), 404);
    await send('rejection with GET', withChanges(fixture('report-token-rejection'), { method: 'GET' }), 405);
    await send('rejection, body too large', tooLarge('report-token-rejection'), 413);

    // POST rate-limit-reports
    const current = relogged.tokenId;
    await send(
      'rate-limit report',
      withBody('report-rate-limit', { tokenId: current, retryAfterSeconds: 1 }),
      204,
    );
    // The vendor's headers said no room left for the previous token until `reset`: its permits are capped.
    const reset = Math.ceil(h.clock.now() / 1000) + 30;
    await send(
      'rate-limit report of headers',
      withBody('report-rate-limit', { tokenId, limit: 50, remaining: 0, reset }),
      204,
    );
    const capped = await send(
      'permits past the vendor’s count',
      withBody('acquire-permits', { tokenId, count: 1 }),
      429,
    );
    expect(parseBody(capped)).toMatchObject({ details: { reason: 'VENDOR_CAP' } });
    await send(
      'rate-limit report over the limit',
      withBody('report-rate-limit', { tokenId: current, remaining: 0, reset: 1 }),
      429,
    );
    await send(
      'rate-limit report, remaining without reset',
      withBody('report-rate-limit', { tokenId: current, remaining: 0 }),
      400,
    );
    await send(
      'rate-limit report, nothing reported',
      withBody('report-rate-limit', { tokenId: current }),
      400,
    );
    await send(
      'rate-limit report, retryAfterSeconds a string',
      withBody('report-rate-limit', { tokenId: current, retryAfterSeconds: 'x' }),
      400,
    );
    await send(
      'rate-limit report, retryAfterSeconds above a day',
      withBody('report-rate-limit', { tokenId: current, retryAfterSeconds: 90_000 }),
      400,
    );
    // The reported 429 holds every permit of the token: denied for COOLDOWN, the same 429 shape.
    const cooldown = await send(
      'permits during a reported cooldown',
      withBody('acquire-permits', { tokenId: current, count: 1 }),
      429,
    );
    expect(parseBody(cooldown)).toMatchObject({ details: { reason: 'COOLDOWN' } });
    const cooling = parseBody<SetList>(
      await send('list during the cooldown', fixture('list-credential-sets'), 200),
    );
    expect(cooling.credentialSets[0]?.health.rateLimitedUntil).not.toBeNull();
    expect(cooling.credentialSets[0]?.quota?.some((window) => window.class === 'reports')).toBe(true);
    await send(
      'rate-limit report as operator',
      as(withBody('report-rate-limit', { tokenId: current, retryAfterSeconds: 1 }), ONCALL_SESSION),
      403,
    );
    await send(
      'rate-limit report of an unknown set',
      onSet(withBody('report-rate-limit', { tokenId: current, retryAfterSeconds: 1 }), 'nope'),
      404,
    );
    await send(
      'rate-limit report with GET',
      withChanges(fixture('report-rate-limit'), { method: 'GET' }),
      405,
    );
    await send('rate-limit report, body too large', tooLarge('report-rate-limit'), 413);

    // POST refresh: past the refresher's one attempt a minute, then within it.
    await h.clock.advance(61_000);
    const refreshed = await send('refresh', refreshAs(LEAD_SESSION), 200);
    expect(parseBody(refreshed)).toMatchObject({ loggedIn: true, replacedTokenId: current });
    // Within the minute, the token just made is the answer, not a new login.
    const again = await send('refresh again', refreshAs(LEAD_SESSION), 200);
    expect(parseBody(again)).toMatchObject({ loggedIn: false, tokenId: parseBody(refreshed).tokenId });
    await send('refresh with a field', refreshAs(LEAD_SESSION, { force: true }), 400);
    await send('refresh with a body not JSON', refreshAs(LEAD_SESSION, 'now please'), 400);
    await send(
      'refresh as a consumer',
      refreshAs('arn:aws:sts::123456789012:assumed-role/portfolio-service/s'),
      403,
    );
    await send('refresh as a status-only operator', refreshAs(ONCALL_SESSION), 403);
    await send('refresh as stranger', refreshAs(STRANGER), 403);
    await send('refresh of an unknown set', onSet(refreshAs(LEAD_SESSION), 'nope'), 404);
    await send('refresh with GET', withChanges(refreshAs(LEAD_SESSION), { method: 'GET' }), 405);
    await send(
      'refresh, body too large',
      as(
        withChanges(tooLarge('acquire-permits'), { path: '/v1/credential-sets/uat-advisor/refresh' }),
        LEAD_SESSION,
      ),
      413,
    );

    // Paths the document does not list: 404 in the error body.
    await send(
      'a trailing slash',
      withChanges(fixture('list-credential-sets'), { path: '/v1/credential-sets/' }),
      404,
    );
    await send(
      'no such route',
      withChanges(fixture('list-credential-sets'), { path: '/v2/credential-sets' }),
      404,
    );
  });

  it('matches the give-back answers: not recorded (200 notRecorded), a count above any grant (400), over the limit (429)', async () => {
    const h = await startHarness({
      reportLimits: { giveBacks: { perCaller: SPENT_PER_CALLER + 1, perSet: SPENT_PER_CALLER + 2 } },
    });
    const send = (name: string, event: VendEvent, status: number) => check(h.invoke, name, event, status);
    const { tokenId } = parseBody<{ tokenId: string }>(await send('token', fixture('get-token'), 200));
    const grants: { receipt: string }[] = [];
    for (let i = 0; i <= SPENT_PER_CALLER; i++)
      grants.push(parseBody(await send('permits', withBody('acquire-permits', { tokenId, count: 1 }), 200)));
    const [first] = grants as [{ receipt: string }];
    // Not counted against the limit: bad input is refused before.
    await send(
      'return, count above any grant',
      withBody('return-permits', { tokenId, count: 51, receipt: first.receipt }),
      400,
    );
    for (const [i, { receipt }] of grants.entries()) {
      const answer = parseBody(
        await send(`return ${i}`, withBody('return-permits', { tokenId, count: 1, receipt }), 200),
      );
      expect(answer.notRecorded, `return ${i}`).toBe(i < SPENT_PER_CALLER ? undefined : 'CALLER_SHARE');
    }
    const limited = await send(
      'return over the give-back limit',
      withBody('return-permits', { tokenId, count: 1, receipt: first.receipt }),
      429,
    );
    expect(parseBody(limited)).toMatchObject({ details: { reason: 'REPORT_LIMIT', scope: 'caller' } });
  });

  it('matches the outage and failure answers: 503 TOKEN_UNAVAILABLE and LEDGER_UNAVAILABLE, 500', async () => {
    const h = await startHarness({ operators: [LEAD] });
    const send = (name: string, event: VendEvent, status: number) => check(h.invoke, name, event, status);
    const tokenId = parseBody<{ tokenId: string }>(await send('token', fixture('get-token'), 200)).tokenId;
    const { receipt } = parseBody<{ receipt: string }>(
      await send('permits', withBody('acquire-permits', { tokenId, count: 1 }), 200),
    );
    const requests: [string, VendEvent][] = [
      ['list', fixture('list-credential-sets')],
      ['token', fixture('get-token')],
      ['permits', withBody('acquire-permits', { tokenId, count: 1 })],
      ['return', withBody('return-permits', { tokenId, count: 1, receipt })],
      ['rejection', withBody('report-token-rejection', { tokenId, errorCode: 'TOKEN_EXPIRED' })],
      ['rate-limit report', withBody('report-rate-limit', { tokenId, retryAfterSeconds: 1 })],
      ['refresh', refreshAs(LEAD_SESSION)],
    ];

    // 500: a bug in a part (the tokens table read throws something that is not one of the broker's errors),
    // each through a fresh container so that the read is not served from memory. The one injected fault of
    // this file (as in vend-server-errors.test.ts): a bug has no real trigger, everything else is real.
    for (const [name, event] of requests) {
      const container = h.newContainer();
      vi.spyOn(h.store, 'read').mockRejectedValueOnce(
        new TypeError("Cannot read properties of undefined (reading 'S')"),
      );
      await check(container.invoke, `${name}: a bug`, event, 500);
      vi.restoreAllMocks();
    }

    // 503 TOKEN_UNAVAILABLE: the vendor is down when a login is needed.
    await h.clock.advance(61_000);
    h.sandbox.update({ outage: true });
    await send(
      'token of a set not logged in yet, vendor down',
      as(onSet(fixture('get-token'), 'uat-execution'), REPORTING_SESSION),
      503,
    );
    const failing = parseBody<SetList>(
      await send(
        'list of a set whose login failed',
        as(fixture('list-credential-sets'), REPORTING_SESSION),
        200,
      ),
    );
    expect(failing.credentialSets[0]?.health).toMatchObject({
      state: 'NO_USABLE_TOKEN',
      consecutiveFailures: 1,
    });
    expect(failing.credentialSets[0]?.health.lastError).not.toBeNull();
    await send(
      'rejection, vendor down',
      withBody('report-token-rejection', { tokenId, errorCode: 'TOKEN_INVALID' }),
      503,
    );
    const refreshFailed = await send('refresh, vendor down', refreshAs(LEAD_SESSION), 503);
    expect(parseBody(refreshFailed)).toMatchObject({
      details: {
        credentialSet: 'uat-advisor',
        cause: { code: 'SERVICE_UNAVAILABLE' },
        servedTokenId: tokenId,
      },
    });
    h.sandbox.update({ outage: false });

    // 503 LEDGER_UNAVAILABLE: the ledger table (also the report limits') does not answer.
    await h.dynamo.client.send(new DeleteTableCommand({ TableName: h.ledgerTable }));
    // (A forced re-login does not use the ledger: it is not among them.)
    for (const [name, event] of requests.slice(2).filter(([name]) => name !== 'refresh')) {
      const result = await send(`${name}, ledger down`, event, 503);
      expect(parseBody(result).errorCode, name).toBe('LEDGER_UNAVAILABLE');
    }
    // The token and the list are still served, their quota null (past the quota figures' second in memory).
    await h.clock.advance(2_000);
    const noQuota = await send('token, ledger down', fixture('get-token'), 200);
    expect(parseBody(noQuota).quota).toBeNull();
    const listNoQuota = parseBody<SetList>(
      await send('list, ledger down', fixture('list-credential-sets'), 200),
    );
    expect(listNoQuota.credentialSets[0]?.quota).toBeNull();

    // 503 TOKEN_UNAVAILABLE: the tokens table does not answer (a fresh container: nothing in memory).
    await h.dynamo.client.send(new DeleteTableCommand({ TableName: h.tokensTable }));
    const container = h.newContainer();
    // (A rejection report is counted in the ledger table first: with both down it is LEDGER_UNAVAILABLE.)
    const tokenReaders = requests.filter(([name]) => name !== 'token' && name !== 'rejection');
    for (const [name, event] of tokenReaders) {
      const result = await check(container.invoke, `${name}, tokens table down`, event, 503);
      expect(parseBody(result).errorCode, name).toBe('TOKEN_UNAVAILABLE');
    }
  });

  it('matches the list of a set with reservations: each reservation and the shared part per window', async () => {
    const h = await startHarness({
      operators: [ONCALL],
      setOverrides: { rateLimits: { reservations: [{ consumer: 'portfolio', perWindow: { 60: 20 } }] } },
    });
    const { tokenId } = parseBody<{ tokenId: string }>(
      await check(h.invoke, 'token', fixture('get-token'), 200),
    );
    await check(h.invoke, 'permits', withBody('acquire-permits', { tokenId, count: 3 }), 200);
    const list = as(fixture('list-credential-sets'), ONCALL_SESSION);
    const result = await check(h.invoke, 'list, reservations', list, 200);
    const [minute, hour] = parseBody<SetList>(result).credentialSets[0]?.quota ?? [];
    expect(minute).toMatchObject({
      used: 3,
      shared: { limit: 30, used: 0, remaining: 30 },
      reservations: [{ consumer: 'portfolio', limit: 20, used: 3, remaining: 17 }],
    });
    expect(Object.keys(hour ?? {}).sort()).toEqual(['limit', 'remaining', 'used', 'windowSeconds']);
    // A consumer sees its own reservation and the shared part, not another consumer's use of its reservation.
    const minuteAs = async (caller: string) =>
      parseBody<SetList>(
        await check(h.invoke, `list as ${caller}`, as(fixture('list-credential-sets'), caller), 200),
      ).credentialSets[0]?.quota?.[0];
    expect(await minuteAs('arn:aws:sts::123456789012:assumed-role/portfolio-service/s1')).toMatchObject({
      shared: { limit: 30, used: 0, remaining: 30 },
      reservations: [{ consumer: 'portfolio', limit: 20, used: 3, remaining: 17 }],
    });
    const batchSees = await minuteAs(BATCH);
    expect(batchSees).toMatchObject({ used: 3, shared: { limit: 30, used: 0 } });
    expect(batchSees).not.toHaveProperty('reservations');
    // The document holds the parts to their fields: an unknown one is a problem.
    const body = JSON.parse(result.body ?? '{}');
    body.credentialSets[0].quota[0].reservations[0].principal = 'arn:aws:iam::123456789012:role/x';
    expect(
      api.answerProblems(requestOf(list), { ...result, body: JSON.stringify(body) }).join('; '),
    ).toContain('must NOT have additional properties');
  });

  it('matches the list of a set whose credentials the vendor rejects', async () => {
    const h = await startHarness();
    h.credentials.set(
      'broker/uat-execution',
      { username: 'uat-execution', password: 'not-the-password' },
      'v2',
    );
    const token = as(onSet(fixture('get-token'), 'uat-execution'), REPORTING_SESSION);
    await check(h.invoke, 'token, credentials rejected', token, 503);
    const list = as(fixture('list-credential-sets'), REPORTING_SESSION);
    const body = parseBody<SetList>(await check(h.invoke, 'list, credentials rejected', list, 200));
    expect(body.credentialSets[0]?.health).toMatchObject({
      state: 'CREDENTIALS_REJECTED',
      rejectionsOfSecretVersion: 1,
    });
  });

  it('matches the answers over HTTP too, behind a local Function URL with IAM auth (SigV4)', async () => {
    const h = await startHarness();
    const caller: LocalCaller = {
      accessKeyId: 'AKIALOCALOPENAPI0001',
      secretAccessKey: 'local-openapi-test-key',
      principalArn: `arn:aws:iam::${ACCOUNT}:role/portfolio-service`,
    };
    const server = await serveFunctionUrl({
      handler: h.handler,
      verifier: new SigV4Verifier({ callers: [caller], clock: systemClock, region: 'local' }),
      clock: systemClock,
    });
    const signer = new FunctionUrlSigner({ region: 'local', credentials: caller });
    /** Headers of the HTTP connection, not of the answer: the document does not list them. */
    const transport = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
    const call = async (name: string, method: string, path: string, status: number, body?: unknown) => {
      const signed = await signer.sign({
        method,
        url: `${server.url}${path}`,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      const response = await fetch(signed.url, {
        method: signed.method,
        headers: signed.headers,
        ...(signed.body === undefined ? {} : { body: signed.body }),
      });
      const headers: Record<string, string> = {};
      response.headers.forEach((value, key) => {
        if (!transport.has(key)) headers[key] = value;
      });
      const text = await response.text();
      const result: VendResult = { statusCode: response.status, headers, ...(text ? { body: text } : {}) };
      expect(result.statusCode, name).toBe(status);
      const request = { method, path: new URL(path, server.url).pathname };
      expect(api.answerProblems(request, result), name).toEqual([]);
      answered.add(api.locate(request, status).key);
      return result;
    };
    try {
      await call('list', 'GET', '/v1/credential-sets', 200);
      const token = await call(
        'token',
        'GET',
        '/v1/credential-sets/uat-advisor/token?minValiditySeconds=600',
        200,
      );
      const { tokenId } = parseBody<{ tokenId: string }>(token);
      await call(
        'bad minValiditySeconds',
        'GET',
        '/v1/credential-sets/uat-advisor/token?minValiditySeconds=-1',
        400,
      );
      await call('token with POST', 'POST', '/v1/credential-sets/uat-advisor/token', 405, {});
      await call('unknown set', 'GET', '/v1/credential-sets/nope/token', 404);
      await call('unknown route', 'GET', '/v1/tokens', 404);
      await call('permits', 'POST', '/v1/credential-sets/uat-advisor/permits', 200, { tokenId, count: 1 });
      const report = { tokenId, retryAfterSeconds: 1 };
      await call(
        'rate-limit report',
        'POST',
        '/v1/credential-sets/uat-advisor/rate-limit-reports',
        204,
        report,
      );
      // Unsigned: the Function URL itself refuses it, with AWS's body, before the function runs (as the
      // security scheme's description says): not one of the function's answers the document lists.
      const unsigned = await fetch(`${server.url}/v1/credential-sets`);
      expect([unsigned.status, await unsigned.json()]).toEqual([403, { Message: 'Forbidden' }]);
    } finally {
      await server.close();
    }
  });

  // Vitest runs a file's tests in order: this one reads what the tests above answered (run the whole file).
  it('has every (route, status) it documents answered above, and no other', () => {
    const documented = api.documentedAnswers().sort();
    const seen = [...answered].filter((key) => !key.startsWith('(unknown route)')).sort();
    expect(seen).toEqual(documented);
    expect([...answered].filter((key) => key.startsWith('(unknown route)'))).toEqual(['(unknown route) 404']);
    // Finer: each alternative body of each answer (e.g. 503 LEDGER_UNAVAILABLE and TOKEN_UNAVAILABLE), with
    // each errorCode the document allows for it (e.g. the three codes of a 400).
    expect([...variants].sort()).toEqual(api.documentedVariants().sort());
  });
});
