import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  mocksModules,
  requireDynamoDbLocal,
  requireLongSuite,
  splitTestFiles,
} from './support/test-projects.js';

const ROOT = path.resolve(import.meta.dirname, '..');
// Spelt apart, so that this file's own text neither asks for the engine nor imports the real engines.ts (either
// would put this file itself in the `dynamodb` project): the fixtures' text is put together at run time.
const KEY = 'dynamoDbLocalEndpoint' as const;
const ASK = `inject('${KEY}')`;
const from = (specifier: string) => `from '${specifier}';\n`;
// Likewise for the real-time marker and the soak runners: this file neither imports the one nor calls the others
// (and the fixtures' specifiers below are template literals, which the import reader does not take for imports).
const MARKER = './support/real-time.js';
const SOAK_CALL = `${'runSoak'}(settings)`;
const CLASSES_SOAK_CALL = `${'runClassesSoak'}({ variant })`;
const EMPTY = { long: [], longDynamodb: [], fullRuns: [] };

describe('test projects: which files start DynamoDB Local', () => {
  const tree = mkdtempSync(path.join(tmpdir(), 'test-projects-'));
  afterAll(() => rmSync(tree, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(tree, file)), { recursive: true });
    writeFileSync(path.join(tree, file), text);
  };

  it('puts a file in the dynamodb project when it, or a test module it imports, asks for the engine', () => {
    write('test/support/engines.ts', `import { inject } ${from('vitest')}export const e = ${ASK};\n`);
    write('test/support/world.ts', `export { e } ${from('./engines.js')}`);
    write('test/support/plain.ts', `import { x } ${from('../../shared/x.js')}export const p = x;\n`);
    write('shared/x.ts', `export const x = 1; // ${ASK} outside test/ is never followed\n`);
    write('test/direct.test.ts', `const endpoint = inject( "${KEY}" );\n`);
    write('test/through-harness.test.ts', `import { e } ${from('./support/world.js')}`);
    write('test/dynamic.test.ts', `const { e } = await import('${'./support/engines.js'}');\n`);
    write(
      'test/pure.test.ts',
      `import { p } ${from('./support/plain.js')}import { x } ${from('../shared/x.js')}`,
    );
    write('test/nested/deeper.test.ts', `import { startEngine } ${from('../support/engines.js')}`);

    expect(splitTestFiles(tree)).toEqual({
      ...EMPTY,
      unit: ['test/pure.test.ts'],
      dynamodb: [
        'test/direct.test.ts',
        'test/dynamic.test.ts',
        'test/nested/deeper.test.ts',
        'test/through-harness.test.ts',
      ],
    });
  });

  it("splits this repository's tests: unit files start no engine, the engines' files are in dynamodb", () => {
    const { unit, dynamodb } = splitTestFiles(ROOT);
    expect(unit).toContain('test/clock.test.ts');
    expect(unit).toContain('test/test-projects.test.ts');
    // Through test/support/engines.ts, through a harness (client-world.ts), and by inject() alone.
    expect(dynamodb).toContain('test/ledger-dynamo.test.ts');
    expect(dynamodb).toContain('test/client-reservations.test.ts');
    expect(dynamodb).toContain('test/local-dynamodb-endpoint.test.ts');
    expect(unit.filter((file) => dynamodb.includes(file))).toEqual([]);
  });
});

describe('test projects: which files wait on real time (npm run test:long), and which have a long form', () => {
  const tree = mkdtempSync(path.join(tmpdir(), 'test-projects-long-'));
  afterAll(() => rmSync(tree, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(tree, file)), { recursive: true });
    writeFileSync(path.join(tree, file), text);
  };

  it('puts a file in test:long when it, or a test module it imports, imports the marker or calls a soak runner', () => {
    write('test/support/real-time.ts', `export {};\n`);
    write('test/support/engines.ts', `export const e = ${ASK};\n`);
    write('test/support/property-runs.ts', `export const propertyRuns = () => 1;\n`);
    write('test/support/soak-case.ts', `import '${'./real-time.js'}';\nexport const soak = 1;\n`);
    write('test/support/classes-case.ts', `export const go = (variant) => ${CLASSES_SOAK_CALL};\n`);
    write('local/soak.ts', `export const runSoak = () => 1; export type SoakResult = {};\n`);
    // The marker, directly or through a harness; a runner called by the file or by a harness.
    write('test/marked.test.ts', `import '${MARKER}';\n`);
    write('test/soak-a.test.ts', `import { soak } ${from(`./support/soak-case.js`)}`);
    write('test/soak-b.test.ts', `import { runSoak } ${from(`../local/soak.js`)}await ${SOAK_CALL};\n`);
    write('test/soak-c.test.ts', `import { go } ${from(`./support/classes-case.js`)}`);
    write('test/computed.test.ts', `const { x } = await import('${MARKER}');\n`);
    // On DynamoDB Local too: test:long's engine project.
    write('test/soak-engine.test.ts', `import '${MARKER}';\nimport { e } ${from(`./support/engines.js`)}`);
    // A type or a pure helper of the soak's module waits on nothing: it stays in npm test.
    write('test/types-only.test.ts', `import type { SoakResult } ${from(`../local/soak.js`)}`);
    // A property with a long form: npm test at its quick runs, test:long again at its full ones.
    write('test/prop.test.ts', `import { propertyRuns } ${from(`./support/property-runs.js`)}`);
    write(
      'test/prop-engine.test.ts',
      `import { propertyRuns } ${from(`./support/property-runs.js`)}${ASK};\n`,
    );

    expect(splitTestFiles(tree)).toEqual({
      unit: ['test/prop.test.ts', 'test/types-only.test.ts'],
      dynamodb: ['test/prop-engine.test.ts'],
      long: [
        'test/computed.test.ts',
        'test/marked.test.ts',
        'test/soak-a.test.ts',
        'test/soak-b.test.ts',
        'test/soak-c.test.ts',
      ],
      longDynamodb: ['test/soak-engine.test.ts'],
      fullRuns: ['test/prop-engine.test.ts', 'test/prop.test.ts'],
    });
  });

  it("keeps this repository's real-time files out of npm test, and its soaks' judges in it", () => {
    const { unit, dynamodb, long, longDynamodb, fullRuns } = splitTestFiles(ROOT);
    const npmTest = [...unit, ...dynamodb];
    for (const soak of [
      'soak-fixed',
      'soak-sliding',
      'soak-reserved',
      'soak-classes',
      'local-time-scale-schedule',
      'python-example-cooldown',
      'docs-curl-commands',
    ])
      expect(long).toContain(`test/${soak}.test.ts`);
    expect(longDynamodb).toContain('test/client-resend-timeouts.test.ts'); // a harness on both engines
    expect([...long, ...longDynamodb].filter((file) => npmTest.includes(file))).toEqual([]);
    expect(npmTest).toContain('test/soak-report.test.ts');
    for (const rest of ['local-time-scale', 'python-example', 'docs-curl', 'client-resend'])
      expect(npmTest).toContain(`test/${rest}.test.ts`);
    expect(npmTest).toContain('test/charts.test.ts'); // imports a type of local/soak.ts, runs no soak
    // The long forms run in both: quick in npm test, full in test:long.
    expect(fullRuns).toContain('test/ledger-property.test.ts');
    expect(fullRuns).toContain('test/ledger-clock-skew.test.ts');
    expect(fullRuns.filter((file) => !npmTest.includes(file))).toEqual([]);
  });

  it('runs the files that mock a module in a fresh process of their own (unit-isolated), and only those', () => {
    const { unit } = splitTestFiles(ROOT);
    const mocking = unit.filter((file) => mocksModules(file, ROOT));
    // The mutants mock learned-limits.ts and its neighbours: in a shared process, a file that loaded them first
    // left the mutants off (all six uncaught in a clean clone's run).
    expect(mocking).toEqual(['test/classes-learned-mutants.test.ts']);
  });

  it("in npm test's projects, a file that waits on real time fails with the reason", () => {
    expect(inject('testSuite')).toBe('npm test');
    expect(() => requireLongSuite(inject('testSuite'))).toThrow(/belongs to `npm run test:long`/);
    expect(() => requireLongSuite('test:long')).not.toThrow();
  });

  it('in the unit project, asking for DynamoDB Local fails with the reason instead of a bad endpoint', () => {
    expect(inject(KEY)).toBeUndefined();
    expect(() => requireDynamoDbLocal(inject(KEY))).toThrow(/`unit` \(or `long`\) vitest project/);
    expect(requireDynamoDbLocal('http://127.0.0.1:8000')).toBe('http://127.0.0.1:8000');
  });
});
