import { describe, expect, it } from 'vitest';
import { type CredentialSetInput, parseCredentialSets } from '../shared/config/credential-sets.js';
import {
  classOfPath,
  classPathList,
  compileRequestClasses,
  MAX_PATTERNS_PER_CLASS,
  patternProblem,
} from '../shared/config/request-classes.js';
import { isSafeVendorPath } from '../shared/vendor-client/resource-path.js';

/** Request classes by path: the configuration's two forms, the pattern rules and the classification. */

const set = (rateLimits: CredentialSetInput['rateLimits']) => ({
  id: 'uat-advisor',
  environment: 'uat',
  companyRole: 'advisor',
  vendorBaseUrl: 'https://vendor.example',
  secretId: 'token-broker/uat-advisor',
  rateLimits,
});
const parsed = (rateLimits: CredentialSetInput['rateLimits']) => {
  const [only] = parseCredentialSets([set(rateLimits)]);
  if (!only) throw new Error('no set');
  return only.rateLimits;
};
const problem = (rateLimits: unknown) => {
  try {
    parseCredentialSets([set(rateLimits as CredentialSetInput['rateLimits'])]);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('parsed');
};

const REPORTS = [{ limit: 10, windowSeconds: 60 }];
const REBALANCING = [{ limit: 4, windowSeconds: 60 }];

describe('rateLimits.classes: the list form and the object form', () => {
  it('keeps the list form: limits, no paths', () => {
    const limits = parsed({ classes: { reports: REPORTS } });
    expect(limits.classes).toEqual({ reports: REPORTS });
    expect(limits.classPaths).toEqual({});
  });

  it('reads the object form into classes (limits) and classPaths (the classes with paths), in order', () => {
    const limits = parsed({
      classes: {
        reports: { paths: ['/reports/**', '/users/*/*/reports/*'], limits: REPORTS },
        bulk: REBALANCING,
        rebalancing: { limits: REBALANCING, paths: ['/rebalancing/**'] },
      },
      itemFormat: 2,
    });
    expect(limits.classes).toEqual({ reports: REPORTS, bulk: REBALANCING, rebalancing: REBALANCING });
    expect(Object.keys(limits.classes)).toEqual(['reports', 'bulk', 'rebalancing']);
    expect(limits.classPaths).toEqual({
      reports: ['/reports/**', '/users/*/*/reports/*'],
      rebalancing: ['/rebalancing/**'],
    });
    expect(classPathList(limits.classPaths)).toEqual([
      { class: 'reports', paths: ['/reports/**', '/users/*/*/reports/*'] },
      { class: 'rebalancing', paths: ['/rebalancing/**'] },
    ]);
  });

  it('reads its own output as written (the functions read their configuration document again)', () => {
    const once = parsed({
      classes: {
        reports: { paths: ['/reports/**'], limits: REPORTS },
        bulk: REBALANCING,
        rebalancing: { limits: REBALANCING, paths: ['/rebalancing/**'] },
      },
      itemFormat: 2,
    });
    const twice = parsed(JSON.parse(JSON.stringify(once)));
    expect(twice).toEqual(once);
    expect(Object.keys(twice.classPaths)).toEqual(['reports', 'rebalancing']);
    // classPaths names configured classes, each of whose paths are given in one place, and is checked alike.
    expect(problem({ classes: { reports: REPORTS }, classPaths: { report: ['/reports/**'] } })).toMatch(
      /rateLimits\.classPaths\.report: "report" is not one of classes/,
    );
    expect(
      problem({
        classes: { reports: { paths: ['/r/**'], limits: REPORTS } },
        classPaths: { reports: ['/r/**'] },
      }),
    ).toMatch(
      /rateLimits\.classPaths\.reports: the paths of class "reports" are given in classes\.reports\.paths/,
    );
    expect(problem({ classes: { reports: REPORTS }, classPaths: { reports: ['reports'] } })).toMatch(
      /rateLimits\.classPaths\.reports\[0\]: path pattern must be an absolute path/,
    );
  });

  it('refuses an unknown key of the object form, naming it, the class and the key it was meant to be', () => {
    expect(problem({ classes: { reports: { path: ['/reports/**'], limits: REPORTS } } })).toContain(
      'credentialSets[0].rateLimits.classes.reports: unknown key `path`; did you mean `paths`?',
    );
  });

  it('reports a wrong limit in the terms of the form that was meant', () => {
    expect(problem({ classes: { reports: [{ limit: 'ten', windowSeconds: 60 }] } })).toMatch(
      /rateLimits\.classes\.reports\[0\]\.limit: .*expected number/,
    );
    expect(
      problem({ classes: { reports: { paths: ['/r/**'], limits: [{ limit: 0, windowSeconds: 60 }] } } }),
    ).toMatch(/rateLimits\.classes\.reports\.limits\[0\]\.limit: /);
    expect(problem({ classes: { reports: 'often' } })).toMatch(
      /rateLimits\.classes\.reports: .*expected object/,
    );
  });

  it('names each wrong pattern with the rule it breaks', () => {
    const message = problem({
      classes: {
        reports: {
          paths: ['reports/**', '/a/**/b', '/a/report-*', '/a?b=1', '/a//b', '/a/%2F', '/a/../b', '/'],
        },
      },
    });
    const at = (index: number, rule: string) =>
      expect(message).toContain(`rateLimits.classes.reports.paths[${index}]: path pattern ${rule}`);
    at(0, 'must be an absolute path');
    at(1, '** may only be the last segment');
    at(2, '* must be a whole segment (in "report-*")');
    at(3, 'must be a path only, without a query');
    at(4, 'must not have an empty segment');
    at(5, 'segments must be letters, digits');
    at(6, 'must not have a . or .. segment');
    at(7, 'must have at least one segment');
  });

  it('bounds the patterns of a class, their length, and refuses an empty list', () => {
    const many = Array.from({ length: MAX_PATTERNS_PER_CLASS + 1 }, (_, i) => `/reports/p${i}/**`);
    expect(problem({ classes: { reports: { paths: many, limits: REPORTS } } })).toMatch(
      new RegExp(`classes\\.reports\\.paths: at most ${MAX_PATTERNS_PER_CLASS} path patterns`),
    );
    expect(problem({ classes: { reports: { paths: [`/${'a'.repeat(200)}`], limits: REPORTS } } })).toMatch(
      /classes\.reports\.paths\[0\]: path pattern must be at most 200 characters/,
    );
    expect(problem({ classes: { reports: { paths: [], limits: REPORTS } } })).toMatch(
      /classes\.reports\.paths: give at least one path pattern, or leave paths out/,
    );
  });

  it('refuses one pattern in two classes, or twice in one, naming both', () => {
    expect(
      problem({
        classes: {
          reports: { paths: ['/reports/**'], limits: REPORTS },
          rebalancing: { paths: ['/rebalancing/**', '/reports/**'], limits: REBALANCING },
        },
        itemFormat: 2,
      }),
    ).toMatch(
      /classes\.rebalancing\.paths\[1\]: path pattern "\/reports\/\*\*" is also a pattern of class "reports"/,
    );
    expect(problem({ classes: { reports: { paths: ['/r/*', '/r/*'], limits: REPORTS } } })).toMatch(
      /classes\.reports\.paths\[1\]: path pattern "\/r\/\*" is given twice/,
    );
  });
});

describe('classOfPath', () => {
  const classes = compileRequestClasses([
    { class: 'reports', paths: ['/reports/**', '/users/*/*/serviceKey/monthly-report'] },
    { class: 'rebalancing', paths: ['/rebalancing/*', '/users/7/**'] },
    { class: 'wide', paths: ['/reports/daily/**'] },
  ]);
  it.each([
    ['/reports/daily', 'reports'],
    ['/reports/daily/2026-01-31', 'reports'],
    ['/reports/daily/', 'reports'],
    ['/users/42/acme/serviceKey/monthly-report', 'reports'],
    ['/rebalancing/run-1', 'rebalancing'],
    ['/users/7/acme/serviceKey/k', 'rebalancing'],
  ])('%s is of %s', (path, cls) => expect(classOfPath(classes, path)).toBe(cls));

  it.each([
    // `**` needs at least one segment; `*` exactly one; literals are whole and case-sensitive.
    '/reports',
    '/reports/',
    '/rebalancing/run-1/more',
    '/rebalancing',
    '/Reports/daily',
    '/users/42/acme/serviceKey/monthly-report-2',
    '/users/42/acme/serviceKey/k',
    '/users/70/acme/serviceKey/k',
    '/reports//x',
    'reports/daily',
    '',
  ])('%s is general', (path) => expect(classOfPath(classes, path)).toBeUndefined());

  it('takes the first class in configuration order where patterns overlap', () => {
    expect(classOfPath(classes, '/reports/daily/x')).toBe('reports');
    const reversed = compileRequestClasses([
      { class: 'wide', paths: ['/reports/daily/**'] },
      { class: 'reports', paths: ['/reports/**'] },
    ]);
    expect(classOfPath(reversed, '/reports/daily/x')).toBe('wide');
    expect(classOfPath(reversed, '/reports/weekly/x')).toBe('reports');
  });

  it('compiles only patterns (the configuration checked them; a broker could still send a newer syntax)', () => {
    expect(() => compileRequestClasses([{ class: 'reports', paths: ['/reports/{a,b}'] }])).toThrow(
      /request class reports: path pattern segments must be/,
    );
    expect(patternProblem('/reports/**')).toBeUndefined();
    expect(patternProblem(7)).toBe('must be a string');
  });
});

describe('isSafeVendorPath (a class path of any shape)', () => {
  it.each(['/reports/daily', '/reports/daily/', '/rebalancing/run-1/a.b~c_d', '/users/1/acme/serviceKey/k'])(
    'accepts %s',
    (path) => expect(isSafeVendorPath(path)).toBe(true),
  );
  it.each([
    '/reports/../restful/login/',
    '/reports/./x',
    '/reports/a%2Fb',
    '/reports/x?y=1',
    '/reports/x#f',
    '/reports//x',
    'reports/x',
    '/',
    `/${'a'.repeat(2048)}`,
  ])('refuses %s', (path) => expect(isSafeVendorPath(path)).toBe(false));
});
