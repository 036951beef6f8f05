import { describe, expect, it } from 'vitest';
import { pythonExampleWorld } from './support/python-example.js';

/**
 * examples/python/token_broker_example.py against `npm start` over HTTP on 127.0.0.1: the Python consumer signs
 * with botocore, takes and gives back permits, asks for fewer when told, and classifies a path by its class. Its
 * report of a vendor 429 and the cooldown it waits out (real time): test/python-example-cooldown.test.ts, in
 * `npm run test:long`.
 */
describe('the Python example against npm start', () => {
  const example = pythonExampleWorld();
  const { quotaOf, runExample, expectNoSecrets, brokerState } = example;

  it('finds a python3 that can import botocore (CI installs python3-botocore when there is none)', () => {
    if (!example.python) {
      throw new Error(
        'no Python with botocore: neither `python3` on PATH nor /usr/bin/python3 can `import botocore`. ' +
          'Install it: sudo apt-get install -y python3-botocore (.ci/run does), or pip install botocore.',
      );
    }
    expect(example.python).toBeTruthy();
  });

  it('takes a batch of permits, makes its vendor calls, gives the unused ones back by receipt', async () => {
    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-execution',
      '--calls',
      '2',
      '--permits',
      '5',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe(`broker ${example.vendUrl}, set uat-execution, region local`);
    expect(lines[1]).toMatch(
      /^token: tokenId=[0-9a-f]{16} expiresInSeconds=\d+ quota: 50\/50 per 60 s, 1000\/1000 per 3600 s$/,
    );
    expect(lines.slice(2)).toEqual([
      'permits: granted 5 of 5, remaining 45/50 per 60 s, 995/1000 per 3600 s',
      'vendor call 1: 404 RESOURCE_NOT_FOUND (expected: the example reads a key nobody created; the call still used its permit)',
      'vendor call 2: 404 RESOURCE_NOT_FOUND (expected: the example reads a key nobody created; the call still used its permit)',
      'give-back: returned 3 of 3 unused permit(s)',
      'done: 2 vendor call(s) made under permits',
    ]);
    // The ledger's own figures: of the 5 granted, the 3 given back are counted no more (the hour's window
    // spans the whole test, so no grant ages out of it meanwhile).
    const hour = (await quotaOf('uat-execution')).find((w) => w.windowSeconds === 3600);
    expect(hour).toMatchObject({ limit: 1000, used: 2, remaining: 998 });
    await expectNoSecrets(stdout, ['uat-execution']);
  }, 60_000);

  it('asks for fewer at once when the broker says one grant can never give it as many (400 with maxCount)', async () => {
    const { code, stdout, stderr } = await runExample([
      '--set',
      'prod-advisor',
      '--calls',
      '2',
      '--permits',
      '60',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    expect(stdout.trim().split('\n').slice(2)).toEqual([
      'permits: 400 INVALID_VALUE, expected: more than one grant can give, asking for 50',
      'permits: granted 50 of 50, remaining 0/50 per 60 s, 950/1000 per 3600 s',
      'vendor call 1: 404 RESOURCE_NOT_FOUND (expected: the example reads a key nobody created; the call still used its permit)',
      'vendor call 2: 404 RESOURCE_NOT_FOUND (expected: the example reads a key nobody created; the call still used its permit)',
      'give-back: returned 48 of 48 unused permit(s)',
      'done: 2 vendor call(s) made under permits',
    ]);
  }, 60_000);

  it('classifies a report path by the class patterns of the set and takes permits of that class', async () => {
    // local/broker.config.json gives uat-advisor the classes reports (/reports/**) and rebalancing, limits learned.
    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-advisor',
      '--calls',
      '1',
      '--permits',
      '1',
      '--vendor-path',
      '/reports/daily/{tenant}',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    // The token answer lists the classes; the path /reports/daily/<tenant> is of "reports" by its pattern.
    expect(lines[2]).toBe('request class: reports (by its path)');
    expect(lines[3]).toMatch(/^permits: granted 1 of 1, remaining .*\(reports\)/);
    // This sandbox may not serve /reports/ (404) or may (200, and its class headers reported for learning).
    expect(lines[4]).toMatch(/^vendor call 1: (404 RESOURCE_NOT_FOUND|200)$/);
    expect(lines.at(-1)).toBe('done: 1 vendor call(s) made under permits');
    await expectNoSecrets(`${stdout}${stderr}`, ['uat-advisor']);
  }, 60_000);
});
