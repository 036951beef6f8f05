import { InvalidResourcePathError } from './errors.js';

/**
 * The documented shape of resource calls (vendor-api.md §4): `/users/<number>/<tenant>/serviceKey/<key>`.
 * Segments are limited to URL-unreserved characters, so a path can neither climb (`..`) nor smuggle
 * a query, a fragment or an encoded slash to the vendor.
 * The vendor's other endpoints (reports, rebalancing: §8) are "not shown", so any other path of such segments is
 * accepted too, except under `/users/` (which must have the documented shape) and `/restful/` (login).
 */
const SEGMENT = '(?!\\.{1,2}/)[A-Za-z0-9._~-]+';
export const RESOURCE_PATH_PATTERN = new RegExp(
  `^/users/\\d+/${SEGMENT}/serviceKey/(?!\\.{1,2}$)[A-Za-z0-9._~-]+$`,
);

const OTHER_ENDPOINT_PATTERN = /^(?!\/users\/|\/restful\/)(\/(?!\.{1,2}(?:\/|$))[A-Za-z0-9._~-]+){1,16}\/?$/;

export function isResourcePath(path: unknown): path is string {
  if (typeof path !== 'string' || path.length > 2048) return false;
  return RESOURCE_PATH_PATTERN.test(path) || OTHER_ENDPOINT_PATTERN.test(path);
}

/** Throws `InvalidResourcePathError` (nothing is sent) unless `path` is of the documented shape or another endpoint's. */
export function assertResourcePath(path: unknown): asserts path is string {
  if (!isResourcePath(path)) {
    throw new InvalidResourcePathError(
      'resource path must have the shape /users/<number>/<tenant>/serviceKey/<key> (segments of letters, digits, . _ ~ -)',
    );
  }
}
