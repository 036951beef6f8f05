/**
 * Request classes by path: a credential set's `rateLimits.classes` may give each class path patterns, and a
 * vendor request is of the first class (in configuration order) with a pattern its path matches, else general.
 *
 * A pattern is an absolute path of segments: `*` matches exactly one segment, `**` (only as the last segment)
 * one or more, any other segment itself (case-sensitive). Literal segments are URL-unreserved characters, so a
 * pattern means the same before and after percent-decoding and cannot name a query or a fragment. Segments are
 * whole: `report-*` is refused rather than read as a prefix (one rule, the same in every client).
 *
 * No zod and no I/O here: the consumer library compiles the patterns the broker sends with the token.
 */

/** Patterns per class: a class is a family of endpoints, named by a few prefixes, not a list of URLs. */
export const MAX_PATTERNS_PER_CLASS = 8;
/** Characters per pattern; with MAX_CLASSES and the count above, a token answer carries at most a few KiB. */
export const MAX_PATTERN_LENGTH = 200;

const LITERAL_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/** What is wrong with a pattern, in words for a configuration message; undefined when it is a pattern. */
export function patternProblem(pattern: unknown): string | undefined {
  if (typeof pattern !== 'string') return 'must be a string';
  if (pattern.length > MAX_PATTERN_LENGTH) return `must be at most ${MAX_PATTERN_LENGTH} characters`;
  if (!pattern.startsWith('/')) return 'must be an absolute path (start with /)';
  if (/[?#]/.test(pattern)) return 'must be a path only, without a query (?) or a fragment (#)';
  const segments = pattern.slice(1).split('/');
  for (const [index, segment] of segments.entries()) {
    if (segment === '') {
      return pattern === '/'
        ? 'must have at least one segment'
        : 'must not have an empty segment (// or a trailing /)';
    }
    if (segment === '**') {
      if (index !== segments.length - 1) return '** may only be the last segment';
      continue;
    }
    if (segment === '*') continue;
    if (segment.includes('*')) return `* must be a whole segment (in "${segment}")`;
    if (segment === '.' || segment === '..') return 'must not have a . or .. segment';
    if (!LITERAL_SEGMENT.test(segment))
      return `segments must be letters, digits, . _ ~ - or a whole * / ** (in "${segment}")`;
  }
  return undefined;
}

/** One class's patterns, as the broker's token answer lists them (configuration order). */
export interface ClassPaths {
  class: string;
  paths: readonly string[];
}

type CompiledPattern = { segments: readonly string[]; rest: boolean };

/** The patterns of a set, split into segments once: classOfPath only compares strings. */
export interface RequestClasses {
  readonly classes: readonly { name: string; patterns: readonly CompiledPattern[] }[];
}

/** Compiles a set's class patterns. Throws on a pattern that is not one (configuration validates them first). */
export function compileRequestClasses(classPaths: readonly ClassPaths[]): RequestClasses {
  return {
    classes: classPaths.map(({ class: name, paths }) => ({
      name,
      patterns: paths.map((pattern) => {
        const problem = patternProblem(pattern);
        if (problem) throw new Error(`request class ${name}: path pattern ${problem}`);
        const segments = pattern.slice(1).split('/');
        const rest = segments.at(-1) === '**';
        return { segments: rest ? segments.slice(0, -1) : segments, rest };
      }),
    })),
  };
}

/** The segments of a request path; one trailing slash is not a segment (`/reports/x/` is `/reports/x`). */
function segmentsOf(path: string): string[] | undefined {
  if (!path.startsWith('/')) return undefined;
  const segments = path.slice(1).split('/');
  if (segments.length > 1 && segments.at(-1) === '') segments.pop();
  return segments;
}

function matches(pattern: CompiledPattern, segments: readonly string[]): boolean {
  const fixed = pattern.segments.length;
  if (pattern.rest ? segments.length <= fixed : segments.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    const want = pattern.segments[i];
    if (segments[i] === '' || (want !== '*' && want !== segments[i])) return false;
  }
  // `**`: one or more further segments, none of them empty.
  return !pattern.rest || segments.slice(fixed).every((segment) => segment !== '');
}

/**
 * The class of a request path: the first class (configuration order) with a pattern the path matches; undefined
 * for a general request. Matching says nothing of whether the path is safe to send (isSafeVendorPath says that).
 */
export function classOfPath(classes: RequestClasses, path: string): string | undefined {
  const segments = segmentsOf(path);
  if (!segments) return undefined;
  for (const { name, patterns } of classes.classes) {
    if (patterns.some((pattern) => matches(pattern, segments))) return name;
  }
  return undefined;
}

/** A configuration's `classPaths` (a record in configuration order) as the list the token answer carries. */
export const classPathList = (classPaths: Readonly<Record<string, readonly string[]>>): ClassPaths[] =>
  Object.entries(classPaths).map(([name, paths]) => ({ class: name, paths: [...paths] }));
