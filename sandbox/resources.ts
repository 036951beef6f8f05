import { type Answer, type RequestContext, vendorError } from './answers.js';
import type { ResourceStore, ResourceValue } from './store.js';
import type { SandboxTokenClaims } from './tokens.js';

const NUMBER_PATTERN = /^\d{1,18}$/;
/** URL-unreserved characters only: anything percent-encoded or odd is a bad key. */
const KEY_PATTERN = /^[A-Za-z0-9._~-]{1,128}$/;

const notFound = (ctx: RequestContext) => vendorError(ctx, 'RESOURCE_NOT_FOUND', 'Resource not found');
const deleted = (ctx: RequestContext) => vendorError(ctx, 'RESOURCE_DELETED', 'Resource was deleted');

function parseObject(body: string): ResourceValue | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as ResourceValue)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `/users/<number>/<tenant>/serviceKey/<key>` (§4), after auth and rate limiting. Checks in this order:
 * path shape and method (404), number and key format (400), tenant (403), body (400), then the store.
 */
export function handleResource(
  method: string,
  pathname: string,
  body: string,
  ctx: RequestContext,
  claims: SandboxTokenClaims,
  store: ResourceStore,
): Answer {
  const segments = pathname.replace(/\/$/, '').split('/');
  const [empty, users, number, tenant, keyKind, key] = segments;
  const isResourcePath =
    segments.length === 6 && empty === '' && users === 'users' && keyKind === 'serviceKey' && tenant !== '';
  if (!isResourcePath || !['GET', 'PUT', 'POST', 'DELETE'].includes(method)) return notFound(ctx);
  if (!NUMBER_PATTERN.test(number ?? '')) {
    return vendorError(ctx, 'INVALID_FORMAT', 'The segment after /users/ must be a number');
  }
  if (!KEY_PATTERN.test(key ?? '')) {
    return vendorError(ctx, 'INVALID_FORMAT', 'serviceKey must be 1-128 letters, digits or . _ ~ -');
  }
  if (tenant !== claims.tenant) {
    return vendorError(ctx, 'WRONG_TENANT', 'The tenant in the path is not the tenant of the token');
  }
  const id = `${number}/${key}`;
  const owner = claims.tenant;

  if (method === 'GET') {
    const read = store.read(owner, id);
    if (read.kind === 'found') return { status: 200, json: read.value };
    return read.kind === 'deleted' ? deleted(ctx) : notFound(ctx);
  }
  if (method === 'DELETE') {
    const removed = store.remove(owner, id);
    if (removed.kind === 'removed') return { status: 204 };
    return removed.kind === 'deleted' ? deleted(ctx) : notFound(ctx);
  }
  const value = parseObject(body);
  if (!value) return vendorError(ctx, 'INVALID_FORMAT', 'Request body must be a JSON object');
  if (method === 'POST') {
    const created = store.create(owner, id, value);
    if (created.kind === 'created') return { status: 201, json: created.value };
    return vendorError(ctx, 'DUPLICATE_KEY', 'A resource with this key already exists; use PUT to update it');
  }
  const replaced = store.replace(owner, id, value);
  if (replaced.kind === 'replaced') return { status: 200, json: replaced.value };
  return replaced.kind === 'deleted' ? deleted(ctx) : notFound(ctx);
}
