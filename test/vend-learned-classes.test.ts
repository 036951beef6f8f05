import { describe, expect, it } from 'vitest';
import { Metric } from '../shared/metric-names.js';
import { fixture, parseBody, type VendHarness, withChanges } from './support/vend-harness.js';
import { requestOf, VendOpenApi } from './support/vend-openapi.js';
import { type VendHarnessOptions, vendHarnessPerTest } from './support/vend-suite.js';

/** Issue 24: the report's `class` teaches a class's limits; the status shows them (docs/class-limits.md). */
const startHarness = vendHarnessPerTest();
let h: VendHarness;
let tokenId: string;

async function start(classes: Record<string, unknown>, options: VendHarnessOptions = {}): Promise<void> {
  h = await startHarness({ ...options, setOverrides: { rateLimits: { classes } } as never });
  tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
}
const acquire = (body: unknown) => h.invoke(withChanges(fixture('acquire-permits'), { body }));
const report = (body: unknown) => h.invoke(withChanges(fixture('report-rate-limit'), { body }));
const resetIn = (seconds: number) => Math.floor(h.clock.now() / 1000) + seconds;
const api = new VendOpenApi();
/** The status's classes of uat-advisor; the answer validated against docs/vend-api.openapi.yaml. */
const classesOf = async () => {
  const event = fixture('list-credential-sets');
  const result = await h.invoke(event);
  expect(api.answerProblems(requestOf(event), result)).toEqual([]);
  return parseBody<{ credentialSets: { id: string; classes?: unknown }[] }>(result).credentialSets.find(
    (set) => set.id === 'uat-advisor',
  )?.classes;
};

describe('POST /v1/credential-sets/{id}/rate-limit-reports with a class', () => {
  it('an unknown class is a 400 naming it, and nothing is written', async () => {
    await start({ reports: [] });
    const items = await h.ledgerItems();
    const result = await report({
      tokenId,
      class: 'rebalancing',
      limit: 5,
      remaining: 4,
      reset: resetIn(40),
    });
    expect(result.statusCode).toBe(400);
    expect(parseBody(result)).toMatchObject({
      errorCode: 'INVALID_VALUE',
      details: { field: 'class' },
      errorMessage: expect.stringContaining('"rebalancing" is not a class of this credential set (reports)'),
    });
    expect(await h.ledgerItems()).toBe(items);
  });

  it('a learned class: the probe grants one; a class answer teaches its limit; the status shows it', async () => {
    await start({ reports: [] });
    // The token answer says the class is learned (the client then reports its answers' headers to renew them).
    const event = fixture('get-token');
    const answer = await h.invoke(event);
    expect(api.answerProblems(requestOf(event), answer)).toEqual([]);
    expect(parseBody<{ classes: unknown }>(answer).classes).toEqual([
      { class: 'reports', paths: [], learned: true },
    ]);
    const probe = parseBody<{ maxCount: number }>(await acquire({ tokenId, count: 1, class: 'reports' }));
    expect(probe.maxCount).toBe(1);
    expect((await acquire({ tokenId, count: 1, class: 'reports' })).statusCode).toBe(429);
    expect(await classesOf()).toEqual({ reports: { learned: true, limits: [] } });
    const reset = resetIn(45);
    const body = { tokenId, class: 'reports', limit: 5, remaining: 4, reset };
    const operation = api.locate(requestOf(withChanges(fixture('report-rate-limit'), { body })), 204);
    if (operation.kind === 'operation') expect(api.requestProblems(operation.operation, body)).toEqual([]);
    else expect.fail('the report route is documented');
    expect((await report(body)).statusCode).toBe(204);
    // The vendor said 4 left: 4 now, then no more this window.
    const grant = await acquire({ tokenId, count: 4, class: 'reports' });
    expect(grant.statusCode).toBe(200);
    expect(parseBody(grant)).toMatchObject({
      maxCount: 5,
      remaining: expect.arrayContaining([{ limit: 5, windowSeconds: 60, remaining: 0, class: 'reports' }]),
    });
    expect(await classesOf()).toEqual({
      reports: {
        learned: true,
        limits: [
          {
            limit: 5,
            windowSeconds: 60,
            source: 'learned',
            learnedAt: new Date(h.clock.now()).toISOString(),
            // One caller's word: a window and three margins after its report (docs/class-limits.md, T2).
            provisionalUntil: new Date(h.clock.now() + 60_000 + 3 * 3000).toISOString(),
          },
        ],
      },
    });
    // Not below a configured limit (there is none): no alarm metric.
    expect(h.telemetry.sum(Metric.ClassLimitBelowConfigured)).toBe(0);
  });

  it('a configured class: a learned limit below its configuration raises the metric and shows beside it', async () => {
    await start({ reports: [{ limit: 10, windowSeconds: 60 }] });
    // The answer reported is to a request of the class a permit let through (docs/class-limits.md, I2).
    expect((await acquire({ tokenId, count: 1, class: 'reports' })).statusCode).toBe(200);
    expect(
      (await report({ tokenId, class: 'reports', limit: 4, remaining: 3, reset: resetIn(50) })).statusCode,
    ).toBe(204);
    expect(h.telemetry.sum(Metric.ClassLimitBelowConfigured, { CredentialSet: 'uat-advisor' })).toBe(1);
    expect(await classesOf()).toMatchObject({
      reports: {
        learned: false,
        limits: [
          { limit: 10, windowSeconds: 60, source: 'configured' },
          { limit: 4, windowSeconds: 60, source: 'learned' },
        ],
      },
    });
    // The same report again teaches nothing new: no second count.
    await report({ tokenId, class: 'reports', limit: 4, remaining: 2, reset: resetIn(50) });
    expect(h.telemetry.sum(Metric.ClassLimitBelowConfigured)).toBe(1);
  });
});
