import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { requireDynamoDbLocal, splitTestFiles } from './support/test-projects.js';

const ROOT = path.resolve(import.meta.dirname, '..');
// Spelt apart, so that this file's own text neither asks for the engine nor imports the real engines.ts (either
// would put this file itself in the `dynamodb` project): the fixtures' text is put together at run time.
const KEY = 'dynamoDbLocalEndpoint' as const;
const ASK = `inject('${KEY}')`;
const from = (specifier: string) => `from '${specifier}';\n`;

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

  it('in the unit project, asking for DynamoDB Local fails with the reason instead of a bad endpoint', () => {
    expect(inject(KEY)).toBeUndefined();
    expect(() => requireDynamoDbLocal(inject(KEY))).toThrow(/`unit` vitest project/);
    expect(requireDynamoDbLocal('http://127.0.0.1:8000')).toBe('http://127.0.0.1:8000');
  });
});
