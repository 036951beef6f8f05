import type { Contender } from './contenders.js';

/**
 * Grants per second in real time: `consumers` loops each asking for 1 permit again as soon as answered, for
 * `durationMs`, with limits far out of reach so that only the limiter's own cost (and contention) shows.
 */
export async function measureThroughput(
  contender: Contender,
  consumers: number,
  durationMs: number,
): Promise<{ grantsPerSecond: number; grants: number; failures: number }> {
  let grants = 0;
  let failures = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: consumers }, async (_, consumer) => {
      while (performance.now() < deadline) {
        try {
          const answer = await contender.acquire(consumer, 1);
          if (answer.granted) grants++;
        } catch {
          failures++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { grantsPerSecond: grants / seconds, grants, failures };
}
