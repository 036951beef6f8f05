import { describe, expect, it } from 'vitest';
import { classesSection } from '../cli/status/class-limits.js';
import type { SetHealthView } from '../cli/status/list-health.js';
import { statusEntries } from '../cli/status/render.js';
import { Metric } from '../shared/metric-names.js';
import { fixture, parseBody, type VendHarness, withChanges } from './support/vend-harness.js';
import { requestOf, VendOpenApi } from './support/vend-openapi.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

/**
 * Issue 32: a class limit that rises (docs/class-limits.md, R1-R3) through the vend API over real parts (dynalite,
 * the vendor sandbox, the real ledger, one ManualClock): the trial and the raised limit in the status and in
 * `token-broker status`, the ClassLimitRaised metric once, and the `vend request` line of the report that adopted it.
 */
const startHarness = vendHarnessPerTest();
const ACCOUNT = '123456789012';
/** A second consumer of uat-advisor (the fixtures' caller is the portfolio service). */
const BATCH = `arn:aws:iam::${ACCOUNT}:user/ops/batch-runner`;
const api = new VendOpenApi();

describe('a learned class limit that rises', () => {
  let h: VendHarness;
  let tokenId: string;
  const acquire = (count = 1) =>
    h.invoke(withChanges(fixture('acquire-permits'), { body: { tokenId, count, class: 'reports' } }));
  /** A class answer's headers as `callerArn` (default: the portfolio service) reports them. */
  const report = (limit: number, remaining: number, resetInSeconds: number, callerArn?: string) =>
    h.invoke(
      withChanges(fixture('report-rate-limit'), {
        body: {
          tokenId,
          class: 'reports',
          limit,
          remaining,
          reset: Math.floor(h.clock.now() / 1000) + resetInSeconds,
        },
        ...(callerArn === undefined ? {} : { callerArn, callerAccountId: ACCOUNT }),
      }),
    );
  const granted = async (count: number) => {
    for (let i = 0; i < count; i++) expect((await acquire()).statusCode).toBe(200);
  };
  /** The status's answer (validated against docs/vend-api.openapi.yaml): uat-advisor's classes, and the CLI's. */
  const status = async () => {
    const event = fixture('list-credential-sets');
    const result = await h.invoke(event);
    expect(api.answerProblems(requestOf(event), result)).toEqual([]);
    const sets = parseBody<{ credentialSets: (SetHealthView & { classes?: unknown })[] }>(
      result,
    ).credentialSets;
    const advisor = sets.filter((set) => set.id === 'uat-advisor');
    return {
      classes: advisor[0]?.classes,
      cli: classesSection(statusEntries(advisor, h.clock.now()), h.clock.now()),
    };
  };
  const iso = (ms: number) => new Date(ms).toISOString();

  it('two callers report more than the kept limit, the trial lets one more through, a report after it adopts the rise', async () => {
    h = await startHarness({ setOverrides: { rateLimits: { classes: { reports: [] } } } as never });
    tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
    const start = h.clock.now();
    // The probe's grant, its answer reported by two callers: 10 per minute, kept (T4).
    await granted(1);
    await h.clock.advance(500);
    expect((await report(10, 9, 45)).statusCode).toBe(204);
    expect((await report(10, 9, 45, BATCH)).statusCode).toBe(204);
    const keptAt = h.clock.now();

    // A minute later the kept limit holds: 10, not 11.
    await h.clock.advance(70_000 - (h.clock.now() - start));
    await granted(10);
    expect((await acquire()).statusCode).toBe(429);
    // R1: the vendor now says 20 a minute, and two callers report it (answers not refused): a trial begins.
    await h.clock.advance(500);
    expect(await report(20, 19, 59)).toMatchObject({ statusCode: 204 });
    await h.clock.advance(500);
    expect(await report(20, 18, 58, BATCH)).toMatchObject({ statusCode: 204 });
    const trialSince = h.clock.now();
    // R2: one more a window than the kept limit: the 11th of this window now, and no 12th.
    await h.clock.advance(1000);
    await granted(1);
    expect((await acquire()).statusCode).toBe(429);
    // The 11th's answer, reported: the trial's ring is full (R3 counts from here).
    await h.clock.advance(500);
    expect(await report(20, 17, 57)).toMatchObject({ statusCode: 204 });
    expect(h.telemetry.sum(Metric.ClassLimitRaised)).toBe(0);
    const trying = await status();
    expect(trying.classes).toEqual({
      reports: {
        learned: true,
        limits: [
          {
            limit: 10,
            windowSeconds: 60,
            source: 'learned',
            learnedAt: iso(keptAt),
            trial: { limit: 11, reportedLimit: 20, since: iso(trialSince) },
          },
        ],
      },
    });
    expect(trying.cli).toBe(
      'CLASSES\n' +
        '  uat-advisor: reports 10 per 1m learned 1m 12s ago ' +
        '(trying 11 per 1m above the kept 10 since 1s ago: 20 reported)\n',
    );

    // R3: three windows into the trial, its ring full a window and more before, and full again (11 at once), a
    // class answer reported with no 429 since: adopted.
    await h.clock.advance(trialSince + 175_000 - h.clock.now());
    await granted(11);
    expect((await acquire()).statusCode).toBe(429);
    await h.clock.advance(8000);
    expect(h.telemetry.sum(Metric.ClassLimitRaised)).toBe(0);
    expect(await report(20, 19, 52)).toMatchObject({ statusCode: 204 });
    const raisedAt = h.clock.now();
    expect(h.telemetry.sum(Metric.ClassLimitRaised, { CredentialSet: 'uat-advisor' })).toBe(1);
    const line = h.telemetry.logs.filter((l) => l.message === 'vend request').at(-1)?.attributes;
    expect(line).toMatchObject({
      route: 'reportRateLimit',
      credentialSet: 'uat-advisor',
      decision: 'RATE_HEADERS_REPORTED',
      learnedClass: 'reports',
      raisedFrom: 10,
      raisedTo: 20,
      raisedWindowSeconds: 60,
    });

    // Kept, shown as raised from the limit it replaced; the trial is over.
    const raised = await status();
    expect(raised.classes).toEqual({
      reports: {
        learned: true,
        limits: [
          { limit: 20, windowSeconds: 60, source: 'learned', learnedAt: iso(raisedAt), raisedFrom: 10 },
        ],
      },
    });
    expect(raised.cli).toBe('CLASSES\n  uat-advisor: reports 20 per 1m learned 0s ago (raised from 10)\n');
    // The class is held to it: 9 more in this window (11 granted), and a grant says the new most.
    const grant = await acquire(9);
    expect(grant.statusCode).toBe(200);
    expect(parseBody(grant)).toMatchObject({ maxCount: 20 });
    expect((await acquire()).statusCode).toBe(429);
    // Once: later reports of the raised limit count nothing more.
    await h.clock.advance(1000);
    expect((await report(20, 10, 45, BATCH)).statusCode).toBe(204);
    expect(h.telemetry.sum(Metric.ClassLimitRaised)).toBe(1);
  });
});
