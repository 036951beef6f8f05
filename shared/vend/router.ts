import { routeNotFound, type VendRequest } from './http-request.js';
import { MethodNotAllowedError } from './vend-errors.js';

export type RouteName =
  | 'listCredentialSets'
  | 'getToken'
  | 'acquirePermits'
  | 'returnPermits'
  | 'reportTokenRejection'
  | 'reportRateLimit'
  | 'forceRefresh';

interface RouteDefinition {
  name: RouteName;
  method: 'GET' | 'POST';
  /** Literal segments; `{id}` captures the credential set id. */
  pattern: readonly string[];
}

/** The whole API. Exact paths: no trailing slash, no prefix matching. */
export const ROUTES: readonly RouteDefinition[] = [
  { name: 'listCredentialSets', method: 'GET', pattern: ['v1', 'credential-sets'] },
  { name: 'getToken', method: 'GET', pattern: ['v1', 'credential-sets', '{id}', 'token'] },
  { name: 'acquirePermits', method: 'POST', pattern: ['v1', 'credential-sets', '{id}', 'permits'] },
  { name: 'returnPermits', method: 'POST', pattern: ['v1', 'credential-sets', '{id}', 'permits', 'returns'] },
  {
    name: 'reportTokenRejection',
    method: 'POST',
    pattern: ['v1', 'credential-sets', '{id}', 'token', 'rejections'],
  },
  {
    name: 'reportRateLimit',
    method: 'POST',
    pattern: ['v1', 'credential-sets', '{id}', 'rate-limit-reports'],
  },
  { name: 'forceRefresh', method: 'POST', pattern: ['v1', 'credential-sets', '{id}', 'refresh'] },
];

export interface RouteMatch {
  name: RouteName;
  /** The credential set id from the path; undefined for the list route. */
  setId: string | undefined;
}

function matchPattern(
  pattern: readonly string[],
  segments: readonly string[],
): { setId?: string } | undefined {
  if (pattern.length !== segments.length) return undefined;
  let setId: string | undefined;
  for (let i = 0; i < pattern.length; i++) {
    const part = pattern[i];
    const segment = segments[i] ?? '';
    if (part === '{id}') {
      if (segment === '') return undefined;
      setId = segment;
    } else if (part !== segment) return undefined;
  }
  return setId === undefined ? {} : { setId };
}

/** The route for the request: 404 when no path matches, 405 (with the allowed methods) when only the method is wrong. */
export function matchRoute(request: VendRequest): RouteMatch {
  const allowed: string[] = [];
  for (const route of ROUTES) {
    const match = matchPattern(route.pattern, request.segments);
    if (!match) continue;
    if (route.method === request.method) return { name: route.name, setId: match.setId };
    allowed.push(route.method);
  }
  if (allowed.length > 0) throw new MethodNotAllowedError(allowed);
  throw routeNotFound();
}
