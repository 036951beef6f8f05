import { describe, expect, it } from 'vitest';
import { pythonExampleWorld } from './support/python-example.js';
// The example waits out the vendor's Retry-After (to the end of the sandbox's minute) in real time.
import './support/real-time.js';

/**
 * examples/python/token_broker_example.py against `npm start`: the Python consumer reports a vendor 429 and waits
 * out the cooldown it causes, up to a minute of real time, so this runs in `npm run test:long`; its other
 * behaviours are in test/python-example.test.ts (`npm test`).
 */
describe('the Python example against npm start, through a vendor cooldown', () => {
  const example = pythonExampleWorld();
  const { quotaOf, runExample, expectNoSecrets, brokerState } = example;

  it('reports a vendor 429 to the broker, gives its permits back, and waits out the cooldown before calling again', async () => {
    // The uat vendor answers the next resource request 429 with Retry-After (to the end of its minute window).
    const fault = await fetch(`${example.uatSandboxUrl}/_sandbox/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ errorCode: 'RATE_LIMIT_EXCEEDED', target: 'resources' }),
    });
    expect(fault.status).toBe(201);

    const { code, stdout, stderr } = await runExample([
      '--set',
      'uat-advisor',
      '--calls',
      '1',
      '--permits',
      '3',
    ]);
    expect(stderr, brokerState()).toBe('');
    expect(code).toBe(0);
    const retryAfter = Number(
      /^vendor call 1: 429 RATE_LIMIT_EXCEEDED, Retry-After (\d+) s$/m.exec(stdout)?.[1],
    );
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(stdout).toContain(`rate-limit report: accepted (204), retryAfterSeconds=${retryAfter}\n`);
    // The 429'd request used its permit; the other two go back.
    expect(stdout).toContain('give-back: returned 2 of 2 unused permit(s)\n');
    // Whether the next ask meets the cooldown (it does unless the report and the give-back outlast it), the
    // example asks again until it is granted, and the call is made under the new grant.
    const cooldownWaits = stdout.match(
      /^permits: 429 RATE_LIMIT_EXCEEDED \(COOLDOWN\), Retry-After \d+ s: waiting [\d.]+ s$/gm,
    );
    expect(cooldownWaits?.length ?? 0).toBeLessThanOrEqual(2);
    expect(stdout.match(/^permits: granted 3 of 3, remaining .*$/gm)).toHaveLength(2);
    expect(stdout).toContain(
      'vendor call 1: 404 RESOURCE_NOT_FOUND (expected: the example reads a key nobody created; the call still used its permit)\n',
    );
    expect(stdout).toContain(
      'give-back: returned 2 of 2 unused permit(s)\ndone: 1 vendor call(s) made under permits\n',
    );
    expect(stdout.split('\n').filter((line) => line.startsWith('give-back:'))).toHaveLength(2);

    // The broker's side: the report was accepted as a vendor 429 from this caller, as the vendor said it.
    const audit = example.brokerLog
      .split('\n')
      .filter((line) => line.includes('vend request') && line.includes('decision=VENDOR_429_REPORTED'));
    expect(audit).toHaveLength(1);
    expect(audit[0]).toContain('credentialSet=uat-advisor');
    expect(audit[0]).toContain('status=204');
    const tokenId = /^token: tokenId=([0-9a-f]{16}) /m.exec(stdout)?.[1];
    expect(audit[0]).toContain(`tokenId=${tokenId} `);
    expect(audit[0]).toContain('assumed-role/portfolio-service/');
    // Two grants of 3, each with 2 given back: 2 permits used (the 429'd request and the call after it).
    const hour = (await quotaOf('uat-advisor')).find((w) => w.windowSeconds === 3600);
    expect(hour).toMatchObject({ limit: 1000, used: 2, remaining: 998 });
    // The vendor answered one 429 in all (this file's broker and its uat sandbox are its own).
    const stats = (await (await fetch(`${example.uatSandboxUrl}/_sandbox/stats`)).json()) as {
      responsesByStatus: Record<string, number>;
      errorsByCode: Record<string, number>;
    };
    expect(stats.responsesByStatus['429']).toBe(1);
    expect(stats.errorsByCode.RATE_LIMIT_EXCEEDED).toBe(1);
    await expectNoSecrets(`${stdout}${stderr}`, ['uat-advisor']);
  }, 180_000);
});
