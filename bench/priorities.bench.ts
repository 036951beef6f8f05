/**
 * Client priorities for `npm run bench`: in one process (one BrokerClient), a saturating batch load (workers
 * that each take permit after permit, all the quota allows) and interactive calls arriving every few seconds;
 * the interactive calls' permit wait, with the batch load marked `priority: 'batch'` and without (everything
 * interactive, as before priorities). Simulated time, in-process: the real broker (vend handler behind the
 * local Function URL server with SigV4, dynalite ledger) on a ManualClock that moves in steps only while no
 * broker request of the client is on its way; waits are on that clock, so they are exact to one step.
 */
import type { PermitPriority } from '../client/types.js';
import { drivenClient, SET_ID, startBrokerWorld } from '../test/support/client-world.js';

type Row = Record<string, string | number>;

const QUOTA_PER_MINUTE = 120;
const BATCH_WORKERS = [20, 200];
const INTERACTIVE_EVERY_MS = 3_000;
const SIMULATED_MS = 5 * 60_000;
const STEP_MS = 250;

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

async function simulate(workers: number, batchPriority: PermitPriority): Promise<Row> {
  const w = await startBrokerWorld({
    set: {
      rateLimits: {
        general: [
          { limit: QUOTA_PER_MINUTE, windowSeconds: 60 },
          { limit: 100_000, windowSeconds: 3600 },
        ],
      },
    },
  });
  try {
    const { client, ...driven } = drivenClient(w);
    const { tokenId } = await client.getToken(SET_ID);
    const startedAt = w.clock.now();
    const endAt = startedAt + SIMULATED_MS;
    let batchPermits = 0;
    const interactiveWaits: number[] = [];
    let interactiveFailed = 0;
    const stop = new AbortController();

    const worker = async () => {
      while (!stop.signal.aborted) {
        try {
          await client.acquirePermit(SET_ID, tokenId, {
            priority: batchPriority,
            signal: stop.signal,
            maxWaitMs: SIMULATED_MS,
          });
          batchPermits++;
        } catch {
          return;
        }
      }
    };
    const interactive = async () => {
      const pending: Promise<void>[] = [];
      while (w.clock.now() + INTERACTIVE_EVERY_MS < endAt) {
        await w.clock.sleep(INTERACTIVE_EVERY_MS, stop.signal).catch(() => undefined);
        if (stop.signal.aborted) break;
        const asked = w.clock.now();
        pending.push(
          client.acquirePermit(SET_ID, tokenId, { signal: stop.signal, maxWaitMs: SIMULATED_MS }).then(
            () => {
              interactiveWaits.push(w.clock.now() - asked);
            },
            () => {
              interactiveFailed++;
            },
          ),
        );
      }
      await Promise.all(pending);
    };

    const load = [...Array.from({ length: workers }, worker), interactive()];
    while (w.clock.now() < endAt) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      if (driven.inFlight === 0) await w.clock.advance(STEP_MS);
    }
    stop.abort();
    await Promise.all(load);
    const sorted = interactiveWaits.sort((a, b) => a - b);
    const minutes = SIMULATED_MS / 60_000;
    return {
      'batch workers': workers,
      'batch load marked': batchPriority === 'batch' ? "priority: 'batch'" : 'no (all interactive)',
      'interactive calls': sorted.length,
      'p50 wait ms': percentile(sorted, 50),
      'p99 wait ms': percentile(sorted, 99),
      'max wait ms': sorted.at(-1) ?? Number.NaN,
      'unserved interactive': interactiveFailed,
      'batch permits / min': Math.round(batchPermits / minutes),
      'permit grants': w.callsTo('POST', '/permits').length,
    };
  } finally {
    await w.close();
  }
}

async function rows(): Promise<Row[]> {
  const result: Row[] = [];
  for (const workers of BATCH_WORKERS) {
    result.push(await simulate(workers, 'interactive'), await simulate(workers, 'batch'));
  }
  return result;
}

export async function run(): Promise<{ title: string; rows: Row[]; footnote: string }[]> {
  return [
    {
      title: `interactive permit wait under a saturating batch load in one process (simulated time, in-process): ${QUOTA_PER_MINUTE} permits a minute, batch workers taking permit after permit, an interactive call every ${INTERACTIVE_EVERY_MS / 1000} s, ${SIMULATED_MS / 60_000} simulated minutes`,
      rows: await rows(),
      footnote: `waits on the ManualClock, which moves in ${STEP_MS} ms steps while no broker request is on its way; real broker (vend handler over HTTP + SigV4, dynalite ledger); "unserved" counts interactive calls still waiting when the run ended`,
    },
  ];
}
