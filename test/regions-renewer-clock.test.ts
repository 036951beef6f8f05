import { describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { ClockReference, LedgerClock, MAX_LEDGER_CLOCK_SKEW_MS } from '../shared/ledger/ledger-clock.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { CLOCK_BOUND_MS } from '../shared/regions/lease.js';
import {
  RENEWER_CLOCK_TOLERANCE_MS,
  RenewerClockRefusedError,
  renewerCheck,
  renewerTime,
} from '../shared/regions/renewer-clock.js';

/**
 * The renewer's time (issue 33, shared/regions/renewer-clock.ts): its ledger's time, DynamoDB's clock as the process
 * corrects to it, refused while unmeasured, beyond the ledger's skew, or not known to within a quarter of the
 * lease's clock bound. Answers are simulated as (sent, received, Date's second), as in test/ledger-clock.test.ts.
 */
const T0 = Date.UTC(2026, 10, 29, 9);
const plan = planFor(rateLimitSettingsSchema.parse({}));

/** A process `offsetMs` behind DynamoDB (negative: ahead), after `answers` answers `stepMs` apart, 4 ms round trips. */
function processWith(offsetMs: number, answers: number, stepMs = 1_009) {
  const local = new ManualClock(T0 + 17);
  const reference = new ClockReference();
  for (let i = 0; i < answers; i++) {
    const sent = local.now() + i * stepMs;
    reference.record(sent, sent + 4, Math.floor((sent + 1 + offsetMs) / 1000) * 1000);
  }
  const clock = new LedgerClock({ local, reference, telemetry: new MemoryTelemetry() });
  return { local, clock };
}

describe("the renewer's time", () => {
  it('is ledger time: DynamoDB’s clock, within the tolerance, for a container 90 s ahead as for one on time', () => {
    for (const offsetMs of [0, 90_000, -90_000, -MAX_LEDGER_CLOCK_SKEW_MS]) {
      const { local, clock } = processWith(offsetMs, 200);
      const now = renewerTime(clock).now([plan]);
      expect(Math.abs(now - (local.now() + offsetMs))).toBeLessThanOrEqual(RENEWER_CLOCK_TOLERANCE_MS);
    }
    expect(RENEWER_CLOCK_TOLERANCE_MS).toBe(CLOCK_BOUND_MS / 4);
  });

  it('refuses before the first answer, beyond the skew the ledger accepts, and while DynamoDB’s clock is known only to the second', () => {
    const reason = (offsetMs: number, answers: number, stepMs?: number) => {
      const check = renewerCheck(processWith(offsetMs, answers, stepMs).clock, [plan]);
      return 'refusal' in check ? check.refusal : 'ok';
    };
    expect(reason(0, 0)).toBe('unmeasured');
    expect(reason(MAX_LEDGER_CLOCK_SKEW_MS + 1_500, 200)).toBe('skew');
    expect(reason(-MAX_LEDGER_CLOCK_SKEW_MS - 1_500, 200)).toBe('skew');
    // On time, but one answer (or answers all at the same point of the second): a second wide. The ledger would
    // take the local clock; the renewer must not (two Regions a second apart each way are two seconds apart).
    expect(reason(0, 1)).toBe('uncertain');
    expect(reason(0, 50, 1_000)).toBe('uncertain');
    // Answers at other points of the second narrow it: what the renewer's probes (CLOCK_PROBE_MS) are for.
    expect(reason(0, 12, 143)).toBe('ok');
    // Off by 90 s: the ledger's own rule first (a tenth of the slack, 100 ms).
    expect(reason(90_000, 3, 143)).toBe('uncertain');
    const error = (() => {
      try {
        renewerTime(processWith(MAX_LEDGER_CLOCK_SKEW_MS + 1_500, 200).clock).now([plan]);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(RenewerClockRefusedError);
    expect(error).toMatchObject({ reason: 'skew', code: 'RENEWER_CLOCK_REFUSED' });
  });
});
