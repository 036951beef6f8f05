import fc from 'fast-check';
import type { VendEvent } from '../../shared/vend/vend-handler.js';
import { fixture } from './vend-harness.js';

const SET_IDS = [
  'uat-advisor',
  'uat-execution',
  'uat-spare',
  'no-such-set',
  'UAT-ADVISOR',
  '',
  '%75at-advisor',
];
const SEGMENTS = [
  'v1',
  'credential-sets',
  'token',
  'permits',
  'returns',
  'rejections',
  'rate-limit-reports',
  '..',
  '.',
  '%00',
  '%ZZ',
  '%2F',
  '%',
  '',
];

const pathArb = fc.oneof(
  fc
    .tuple(
      fc.constantFrom(...SET_IDS),
      fc.constantFrom(
        'token',
        'permits',
        'permits/returns',
        'token/rejections',
        'rate-limit-reports',
        'tokens',
        'token/',
        '',
      ),
    )
    .map(([id, tail]) => `/v1/credential-sets/${id}/${tail}`),
  fc.constantFrom('/v1/credential-sets', '/v1/credential-sets/', '/', '', '//', '/v1//credential-sets'),
  fc
    .array(fc.oneof(fc.constantFrom(...SEGMENTS), fc.string({ maxLength: 12 })), { maxLength: 8 })
    .map((s) => `/${s.join('/')}`),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.string({ minLength: 2000, maxLength: 5000 }).map((s) => `/v1/credential-sets/${s}/token`),
);

const methodArb = fc.oneof(
  fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'get', 'post', '', 'TRACE'),
  fc.string({ maxLength: 10 }),
);

const tokenIdArb = fc.oneof(
  fc.constant('real'),
  fc.stringMatching(/^[0-9a-f]{16}$/),
  fc.string({ maxLength: 40 }),
  fc.integer(),
  fc.constant(null),
);
/** Bodies near the valid ones (fields missing, wrong types, out of range, extra) and far from them. */
const objectBodyArb = fc.record(
  {
    tokenId: tokenIdArb,
    count: fc.oneof(
      fc.integer({ min: -5, max: 80 }),
      fc.double(),
      fc.string({ maxLength: 4 }),
      fc.constant(null),
    ),
    class: fc.oneof(fc.constantFrom('reports', 'Reports', ''), fc.string({ maxLength: 8 })),
    grantedAt: fc.oneof(fc.integer(), fc.double(), fc.string({ maxLength: 8 })),
    errorCode: fc.oneof(
      fc.constantFrom('TOKEN_EXPIRED', 'TOKEN_INVALID', 'TOKEN_MISSING'),
      fc.string({ maxLength: 12 }),
    ),
    requestId: fc.string({ maxLength: 150 }),
    retryAfterSeconds: fc.oneof(
      fc.integer({ min: -10, max: 100_000 }),
      fc.double(),
      fc.string({ maxLength: 4 }),
    ),
    limit: fc.oneof(fc.integer({ min: -1, max: 2000 }), fc.string({ maxLength: 4 })),
    remaining: fc.oneof(fc.integer({ min: -1, max: 2000 }), fc.constant(null)),
    reset: fc.oneof(fc.integer({ min: 0, max: 2_000_000_000 }), fc.double()),
    extra: fc.jsonValue({ maxDepth: 2 }),
  },
  { requiredKeys: [] },
);

type BodyCase = { body?: string; isBase64Encoded?: unknown };
const bodyArb: fc.Arbitrary<BodyCase> = fc.oneof(
  fc.constant({}),
  objectBodyArb.map((o) => ({ body: JSON.stringify(o) })),
  objectBodyArb.map((o) => ({
    body: Buffer.from(JSON.stringify(o)).toString('base64'),
    isBase64Encoded: true,
  })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => ({ body: JSON.stringify(v) })),
  fc.string({ unit: 'binary', maxLength: 200 }).map((s) => ({ body: s })),
  fc.string({ maxLength: 200 }).map((s) => ({ body: s, isBase64Encoded: true })),
  fc
    .uint8Array({ maxLength: 200 })
    .map((b) => ({ body: Buffer.from(b).toString('base64'), isBase64Encoded: true })),
  fc.integer({ min: 8_000, max: 40_000 }).map((n) => ({ body: `{"tokenId":"${'a'.repeat(n)}","count":1}` })),
  fc.integer({ min: 6_000, max: 20_000 }).map((n) => ({
    body: Buffer.from(`{"pad":"${'b'.repeat(n)}"}`).toString('base64'),
    isBase64Encoded: true,
  })),
  fc
    .tuple(fc.anything(), fc.anything())
    .map(([body, flag]) => ({ body: body as string, isBase64Encoded: flag })),
);

const callerArb = fc.constantFrom(
  'arn:aws:sts::123456789012:assumed-role/portfolio-service/fuzz',
  'arn:aws:sts::123456789012:assumed-role/reporting-service/fuzz',
  'arn:aws:iam::123456789012:user/ops/batch-runner',
  'arn:aws:sts::999988887777:assumed-role/portfolio-service/fuzz',
  'arn:aws:sts::123456789012:assumed-role/intruder/fuzz',
  'arn:aws:iam::123456789012:root',
  'not an arn',
  '',
  undefined,
);

const headersArb = fc.record(
  {
    'content-type': fc.oneof(
      fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        '',
        'application/problem+json',
        'multipart/form-data; boundary=x',
      ),
      fc.string({ maxLength: 40 }),
    ),
    'content-length': fc.nat().map(String),
    'x-random': fc.string({ maxLength: 100 }),
  },
  { requiredKeys: [] },
);

interface Mutation {
  method?: string;
  path?: string;
  query?: string;
  headers?: Record<string, string>;
  body?: BodyCase;
  caller?: string | undefined;
  dropParts?: string[];
}

const ROUTE_FIXTURES = [
  'get-token',
  'list-credential-sets',
  'acquire-permits',
  'acquire-permits-base64',
  'return-permits',
  'report-token-rejection',
  'report-rate-limit',
];

function build(tokenId: string, base: string, change: Mutation): VendEvent {
  const event = structuredClone(fixture(base)) as unknown as Record<string, unknown> & VendEvent;
  if (change.method !== undefined) event.requestContext.http.method = change.method;
  if (change.path !== undefined) {
    event.rawPath = change.path;
    event.requestContext.http.path = change.path;
  }
  if (change.query !== undefined) event.rawQueryString = change.query;
  if (change.headers) event.headers = { ...event.headers, ...change.headers };
  if (change.body) {
    delete event.body;
    event.isBase64Encoded = false;
    const text = change.body.body;
    // The live token id goes everywhere but into rejection reports (see fuzzEvents).
    const live = String(event.rawPath).includes('rejections') ? '"real"' : `"${tokenId}"`;
    if (text !== undefined) event.body = typeof text === 'string' ? text.replace(/"real"/g, live) : text;
    if (change.body.isBase64Encoded !== undefined) {
      (event as Record<string, unknown>).isBase64Encoded = change.body.isBase64Encoded;
    }
  } else if (typeof event.body === 'string' && !event.isBase64Encoded && base !== 'report-token-rejection') {
    // The fixtures' placeholder id becomes the live token's id, so the mutations start from valid requests.
    // Not for rejections: a valid report of the current token asks for a re-login, and within the refresher's
    // storm-guard interval (the clock stands still here) the honest answer to that is 503 — not bad input.
    event.body = event.body.replace('0000000000000000', tokenId);
  }
  const iam = event.requestContext.authorizer.iam as unknown as Record<string, unknown>;
  if ('caller' in change) {
    iam.userArn = change.caller;
    if (change.caller?.includes('999988887777')) iam.accountId = '999988887777';
  }
  const context = event.requestContext as unknown as Record<string, unknown>;
  for (const part of change.dropParts ?? []) {
    if (part === 'authorizer' || part === 'http' || part === 'requestId') delete context[part];
    else delete (event as Record<string, unknown>)[part];
  }
  return event as VendEvent;
}

const queryArb = fc.oneof(
  fc.constant(''),
  fc
    .oneof(fc.integer(), fc.string({ maxLength: 12 }), fc.double())
    .map((v) => `minValiditySeconds=${encodeURIComponent(String(v))}`),
  fc.constant('minValiditySeconds=1&minValiditySeconds=2'),
  fc.string({ maxLength: 3000 }),
);

/**
 * Function URL events for the fuzz test: `tokenId` is the live token's id, put into bodies where a generator
 * says "real" (never into rejection reports: a valid report of the current token asks for a re-login, and
 * within the refresher's storm-guard interval — the clock stands still in the fuzz test — the honest answer
 * to that valid request is 503).
 */
export function fuzzEvents(tokenId: string): fc.Arbitrary<VendEvent> {
  /** Anything at all in every part. */
  const wildArb = fc
    .record({
      method: methodArb,
      path: pathArb,
      query: queryArb,
      headers: headersArb,
      body: bodyArb,
      caller: callerArb,
      dropParts: fc.subarray(['headers', 'requestContext', 'rawPath', 'authorizer', 'http', 'requestId']),
    })
    .map((change) => build(tokenId, 'acquire-permits', change));

  /** One broken part of an otherwise valid request; bodies and parameters most often, as they reach deepest. */
  const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
    { weight: 6, arbitrary: bodyArb.map((body) => ({ body })) },
    { weight: 2, arbitrary: queryArb.map((query) => ({ query })) },
    { weight: 2, arbitrary: headersArb.map((headers) => ({ headers })) },
    { weight: 1, arbitrary: methodArb.map((method) => ({ method })) },
    { weight: 1, arbitrary: callerArb.map((caller) => ({ caller })) },
    {
      weight: 1,
      arbitrary: fc.subarray(['headers', 'authorizer', 'requestId']).map((dropParts) => ({ dropParts })),
    },
  );

  /** A real request of some route by an allowed caller, with one or two parts broken: reaches the deep checks. */
  const nearValidArb = fc
    .record({
      base: fc.constantFrom(...ROUTE_FIXTURES),
      changes: fc.array(mutationArb, { minLength: 1, maxLength: 2 }),
    })
    .map(({ base, changes }) => build(tokenId, base, Object.assign({}, ...changes) as Mutation));

  return fc.oneof({ weight: 1, arbitrary: wildArb }, { weight: 3, arbitrary: nearValidArb });
}
