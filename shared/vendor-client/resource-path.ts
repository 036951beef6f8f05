import { InvalidResourcePathError } from './errors.js';

/**
 * The documented shape of resource calls (vendor-api.md §4): `/users/<number>/<tenant>/serviceKey/<key>`.
 * Segments are limited to URL-unreserved characters, so a path can neither climb (`..`) nor smuggle
 * a query, a fragment or an encoded slash to the vendor.
 */
const SEGMENT = '(?!\\.{1,2}/)[A-Za-z0-9._~-]+';
export const RESOURCE_PATH_PATTERN = new RegExp(
  `^/users/\\d+/${SEGMENT}/serviceKey/(?!\\.{1,2}$)[A-Za-z0-9._~-]+$`,
);

export function isResourcePath(path: unknown): path is string {
  return typeof path === 'string' && path.length <= 2048 && RESOURCE_PATH_PATTERN.test(path);
}

const SAFE_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/**
 * Any path that is safe to send, whatever its shape: absolute, at most 2048 characters, segments of
 * URL-unreserved characters, none of them `.` or `..` (one trailing slash allowed). For the paths of a
 * configured request class (vendor-api.md §4: other endpoints exist, their shape is not shown): no climbing,
 * no query, fragment or encoded slash, as for the resource shape.
 */
export function isSafeVendorPath(path: unknown): path is string {
  if (typeof path !== 'string' || path.length > 2048 || !path.startsWith('/')) return false;
  const segments = path.slice(1).split('/');
  if (segments.length > 1 && segments.at(-1) === '') segments.pop();
  return segments.every((segment) => SAFE_SEGMENT.test(segment) && segment !== '.' && segment !== '..');
}

/**
 * Throws `InvalidResourcePathError` (nothing is sent) unless `path` is of the documented shape, or, for a path
 * that matched a pattern of a configured request class (`ofClass`), unless it is safe (isSafeVendorPath).
 */
export function assertVendorPath(path: unknown, ofClass: boolean): asserts path is string {
  if (!ofClass) return assertResourcePath(path);
  if (!isSafeVendorPath(path)) {
    throw new InvalidResourcePathError(
      'the path of a request class must be absolute, with segments of letters, digits, . _ ~ - (no . or .., no query, fragment or percent-encoding)',
    );
  }
}

/** Throws `InvalidResourcePathError` (nothing is sent) unless `path` is of the documented shape. */
export function assertResourcePath(path: unknown): asserts path is string {
  if (!isResourcePath(path)) {
    throw new InvalidResourcePathError(
      'resource path must have the shape /users/<number>/<tenant>/serviceKey/<key> (segments of letters, digits, . _ ~ -)',
    );
  }
}
