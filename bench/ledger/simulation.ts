import type { ManualClock } from '../../shared/clock.js';
import type { TimedCount } from '../../test/support/ledger-harness.js';
import type { Contender } from './contenders.js';

/**
 * Consumers of one token under a simulated clock. `steady`: 20 consumers always want 1..5 permits, wait the
 * hint when denied and think up to 2 s after a grant (demand far above the quota). `bursts`: 2 consumers
 * trickle single permits at random moments (so fixed windows start at odd times) while 18 ask for 1..5 each
 * together at random bursts 10-40 s apart, taking no for an answer. `one-class-busy` (with classes only): 17
 * consumers of the first class as in `steady` (far above the class's limits), 3 trickling (general, the second
 * and the third class), so that the class's limits bind and the general ones do not.
 */
export type Scenario = 'steady' | 'bursts' | 'one-class-busy';

/** A grant of `count` permits at `time`, of a request class (`cls`) or of the general limits alone. */
export interface ScopedCount extends TimedCount {
  cls?: string;
}

/** A vendor limit: of every request (no `cls`), or of one request class's requests. */
export interface VendorLimit {
  limit: number;
  windowMs: number;
  cls?: string;
}

export interface SimulationResult {
  grants: ScopedCount[];
  asked: number;
  failures: number;
}

/**
 * `classes`: the set's request classes; with them, each consumer asks for one scope, the general limits alone
 * or a class (and so the general limits too), in turn: consumer i the (i mod (classes + 1))th of [general,
 * ...classes]. Without, every consumer asks for general permits.
 */
export async function simulate(
  contender: Contender,
  scenario: Scenario,
  clock: ManualClock,
  random: () => number,
  durationMs: number,
  classes: readonly string[] = [],
): Promise<SimulationResult> {
  if (scenario === 'one-class-busy' && classes.length < 3)
    throw new Error('one-class-busy needs three classes at least');
  const scopes = [undefined, ...classes];
  const inTurn = (consumer: number) => scopes[consumer % scopes.length];
  const start = clock.now();
  const end = start + durationMs;
  const grants: ScopedCount[] = [];
  let asked = 0;
  let failures = 0;
  let stopped = false;

  const ask = async (consumer: number, count: number, cls: string | undefined) => {
    asked += count;
    try {
      const answer = await contender.acquire(consumer, count, cls);
      if (answer.granted)
        grants.push(cls === undefined ? { time: answer.at, count } : { time: answer.at, count, cls });
      return answer;
    } catch {
      failures++;
      return { granted: false as const, retryAfterMs: 1000 };
    }
  };
  const steady = async (consumer: number, cls = inTurn(consumer)) => {
    while (!stopped) {
      const answer = await ask(consumer, 1 + Math.floor(random() * 5), cls);
      await clock.sleep(answer.granted ? Math.floor(random() * 2000) : answer.retryAfterMs);
    }
  };
  const trickle = async (consumer: number, cls = inTurn(consumer)) => {
    while (!stopped) {
      await clock.sleep(Math.floor(random() * 60_000));
      if (!stopped) await ask(consumer, 1, cls);
    }
  };
  const bursts: number[] = [];
  for (let t = start + 10_000 + random() * 30_000; t < end; t += 10_000 + random() * 30_000)
    bursts.push(Math.floor(t));
  const burst = async (consumer: number) => {
    for (const at of bursts) {
      if (stopped) return;
      await clock.sleep(Math.max(0, at - clock.now()));
      if (!stopped) await ask(consumer, 1 + Math.floor(random() * 5), inTurn(consumer));
    }
    while (!stopped) await clock.sleep(60_000);
  };

  const consumers =
    scenario === 'steady'
      ? Array.from({ length: 20 }, (_, i) => steady(i))
      : scenario === 'bursts'
        ? [trickle(0), trickle(1), ...Array.from({ length: 18 }, (_, i) => burst(i + 2))]
        : [
            ...Array.from({ length: 17 }, (_, i) => steady(i, classes[0])),
            ...[undefined, classes[1], classes[2]].map((cls, i) => trickle(17 + i, cls)),
          ];
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
  grants: readonly ScopedCount[],
  limits: readonly VendorLimit[],
): number {
  const sent = grants.reduce((sum, g) => sum + g.count, 0);
  return sent - slidingVendorAccepted(grants, limits).length;
}

/** The times of the permits such a vendor would accept, in order. */
export function slidingVendorAccepted(
  grants: readonly ScopedCount[],
  limits: readonly VendorLimit[],
): number[] {
  return vendorAcceptedPermits(grants, limits).map((permit) => permit.time);
}

/**
 * The permits (count 1 each) such a vendor would accept, in order: a permit of class c counts against the limits
 * without a class and those of c; one the vendor refuses counts against none.
 */
export function vendorAcceptedPermits(
  grants: readonly ScopedCount[],
  limits: readonly VendorLimit[],
): ScopedCount[] {
  const permits = [...grants]
    .sort((a, b) => a.time - b.time)
    .flatMap((g) => Array.from({ length: g.count }, () => ({ time: g.time, count: 1, cls: g.cls })));
  const accepted: ScopedCount[] = [];
  // Per limit, the times it counted, and the first of them still in its window.
  const counted = limits.map(() => [] as number[]);
  const oldest = limits.map(() => 0);
  const applies = (limit: VendorLimit, cls: string | undefined) =>
    limit.cls === undefined || limit.cls === cls;
  for (const permit of permits) {
    const t = permit.time;
    const full = limits.some((limit, i) => {
      if (!applies(limit, permit.cls)) return false;
      const times = counted[i] as number[];
      while ((times[oldest[i] ?? 0] ?? t) <= t - limit.windowMs) oldest[i] = (oldest[i] ?? 0) + 1;
      return times.length - (oldest[i] ?? 0) >= limit.limit;
    });
    if (full) continue;
    accepted.push(permit.cls === undefined ? { time: t, count: 1 } : permit);
    limits.forEach((limit, i) => {
      if (applies(limit, permit.cls)) counted[i]?.push(t);
    });
  }
  return accepted;
}
