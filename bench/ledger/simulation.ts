import type { ManualClock } from '../../shared/clock.js';
import type { TimedCount } from '../../test/support/ledger-harness.js';
import type { Contender } from './contenders.js';

/**
 * Consumers of one token under a simulated clock. `steady`: 20 consumers always want 1..5 permits, wait the
 * hint when denied and think up to 2 s after a grant (demand far above the quota). `bursts`: 2 consumers
 * trickle single permits at random moments (so fixed windows start at odd times) while 18 ask for 1..5 each
 * together at random bursts 10-40 s apart, taking no for an answer.
 */
export type Scenario = 'steady' | 'bursts';

export interface SimulationResult {
  grants: TimedCount[];
  asked: number;
  failures: number;
}

export async function simulate(
  contender: Contender,
  scenario: Scenario,
  clock: ManualClock,
  random: () => number,
  durationMs: number,
): Promise<SimulationResult> {
  const start = clock.now();
  const end = start + durationMs;
  const grants: TimedCount[] = [];
  let asked = 0;
  let failures = 0;
  let stopped = false;

  const ask = async (consumer: number, count: number) => {
    asked += count;
    try {
      const answer = await contender.acquire(consumer, count);
      if (answer.granted) grants.push({ time: answer.at, count });
      return answer;
    } catch {
      failures++;
      return { granted: false as const, retryAfterMs: 1000 };
    }
  };
  const steady = async (consumer: number) => {
    while (!stopped) {
      const answer = await ask(consumer, 1 + Math.floor(random() * 5));
      await clock.sleep(answer.granted ? Math.floor(random() * 2000) : answer.retryAfterMs);
    }
  };
  const trickle = async (consumer: number) => {
    while (!stopped) {
      await clock.sleep(Math.floor(random() * 60_000));
      if (!stopped) await ask(consumer, 1);
    }
  };
  const bursts: number[] = [];
  for (let t = start + 10_000 + random() * 30_000; t < end; t += 10_000 + random() * 30_000)
    bursts.push(Math.floor(t));
  const burst = async (consumer: number) => {
    for (const at of bursts) {
      if (stopped) return;
      await clock.sleep(Math.max(0, at - clock.now()));
      if (!stopped) await ask(consumer, 1 + Math.floor(random() * 5));
    }
    while (!stopped) await clock.sleep(60_000);
  };

  const consumers =
    scenario === 'steady'
      ? Array.from({ length: 20 }, (_, i) => steady(i))
      : [trickle(0), trickle(1), ...Array.from({ length: 18 }, (_, i) => burst(i + 2))];
  const everyoneWaiting = async () => {
    while (clock.pendingSleepers < consumers.length) await new Promise((r) => setImmediate(r));
  };
  while (clock.now() < end) {
    await everyoneWaiting();
    await clock.advance(Math.max(1, Math.floor(Math.min(random() * 1000, end - clock.now()))));
  }
  await everyoneWaiting();
  stopped = true;
  await clock.advance(24 * 3600_000);
  await Promise.all(consumers);
  return { grants: grants.filter((g) => g.time <= end), asked, failures };
}

/** Permits a vendor with exact sliding windows ((t - W, t]) would refuse, sent at their grant times. */
export function slidingVendorRejections(
  grants: readonly TimedCount[],
  limits: { limit: number; windowMs: number }[],
): number {
  const sent = grants.reduce((sum, g) => sum + g.count, 0);
  return sent - slidingVendorAccepted(grants, limits).length;
}

/** The times of the permits such a vendor would accept, in order. */
export function slidingVendorAccepted(
  grants: readonly TimedCount[],
  limits: { limit: number; windowMs: number }[],
): number[] {
  const permits = [...grants]
    .sort((a, b) => a.time - b.time)
    .flatMap((g) => Array<number>(g.count).fill(g.time));
  const accepted: number[] = [];
  const oldest = limits.map(() => 0);
  for (const t of permits) {
    const full = limits.some(({ limit, windowMs }, i) => {
      while ((accepted[oldest[i] ?? 0] ?? t) <= t - windowMs) oldest[i] = (oldest[i] ?? 0) + 1;
      return accepted.length - (oldest[i] ?? 0) >= limit;
    });
    if (!full) accepted.push(t);
  }
  return accepted;
}
