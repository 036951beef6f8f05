import type { TimedCount } from '../../test/support/ledger-harness.js';
import type { Contender } from './contenders.js';

/**
 * The `steady` demand of simulation.ts on the real clock: `consumers` loops each ask for 1..5 permits, wait the
 * hint when denied and think up to 2 s after a grant, for `durationMs` of real time. A grant is recorded at the
 * moment its answer reaches the consumer (the earliest the vendor call could leave), not the limiter's own
 * decision time, so DynamoDB's latency counts.
 */
export async function runRealTime(
  contender: Contender,
  consumers: number,
  durationMs: number,
  random: () => number,
): Promise<{ grants: TimedCount[]; asked: number; failures: number; start: number; end: number }> {
  const start = Date.now();
  const end = start + durationMs;
  const grants: TimedCount[] = [];
  let asked = 0;
  let failures = 0;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, end - Date.now()))));
  await Promise.all(
    Array.from({ length: consumers }, async (_, consumer) => {
      while (Date.now() < end) {
        const count = 1 + Math.floor(random() * 5);
        asked += count;
        let wait: number;
        try {
          const answer = await contender.acquire(consumer, count);
          if (answer.granted) grants.push({ time: Date.now(), count });
          wait = answer.granted ? Math.floor(random() * 2000) : answer.retryAfterMs;
        } catch {
          failures++;
          wait = 1000;
        }
        await sleep(wait);
      }
    }),
  );
  return { grants: grants.filter((g) => g.time <= end), asked, failures, start, end };
}
