import { type Answer, type RequestContext, vendorError } from './answers.js';
import type { SandboxFamily, SandboxLimit } from './settings.js';

/** The family whose prefix the path starts with (prefixes never overlap, so at most one). */
export function familyFor(families: readonly SandboxFamily[], pathname: string): SandboxFamily | undefined {
  return families.find((family) => pathname.startsWith(family.pathPrefix));
}

/** `10/60s`: how stats and the request log name a limit. */
export const limitLabel = ({ limit, windowSeconds }: SandboxLimit): string => `${limit}/${windowSeconds}s`;

/** What a family's endpoint says it did, by method: the vendor documents none of these answers (§4). */
const OUTCOMES: Record<string, { status: number; state: string }> = {
  GET: { status: 200, state: 'ready' },
  POST: { status: 201, state: 'queued' },
  PUT: { status: 200, state: 'updated' },
  DELETE: { status: 200, state: 'cancelled' },
};

function isJsonOrEmpty(body: string): boolean {
  if (body.trim() === '') return true;
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
}

/**
 * A request under a family's prefix, after auth and rate limiting: a small JSON answer naming the family and
 * the path, so a caller can tell which endpoint answered. No state is kept: the sandbox imitates these
 * endpoints' limits, not their business (which the vendor does not show).
 */
export function handleFamily(
  method: string,
  pathname: string,
  body: string,
  ctx: RequestContext,
  family: SandboxFamily,
): Answer {
  const outcome = Object.hasOwn(OUTCOMES, method) ? OUTCOMES[method] : undefined;
  if (!outcome) return vendorError(ctx, 'RESOURCE_NOT_FOUND', 'Resource not found');
  if (!isJsonOrEmpty(body)) return vendorError(ctx, 'INVALID_FORMAT', 'Request body is not valid JSON');
  return { status: outcome.status, json: { family: family.name, path: pathname, status: outcome.state } };
}
