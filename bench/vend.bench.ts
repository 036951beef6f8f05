/**
 * Vend API figures for `npm run bench`: handler latency (p50, p99) for a token served from the function's
 * memory, a token read from DynamoDB on every request, and a permit grant. Everything real but the clock:
 * dynalite through the real DynamoDB client, the vendor sandbox over HTTP for the one login, the real ledger.
 * Latency is real time around the handler call (what the Lambda runtime would measure), on this machine.
 */
import { performance } from 'node:perf_hooks';
import type { VendEvent } from '../shared/vend/vend-handler.js';
import { startDynalite } from '../test/support/dynalite.js';
import { fixture, parseBody, startVendHarness, withChanges } from '../test/support/vend-harness.js';

type Row = Record<string, string | number>;

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

async function measure(
  name: string,
  iterations: number,
  once: (i: number) => Promise<number>,
  note: string,
): Promise<Row> {
  for (let i = 0; i < 50; i++) await once(-1); // warm up the JIT and the connections
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const started = performance.now();
    const status = await once(i);
    samples.push(performance.now() - started);
    if (status !== 200) throw new Error(`${name}: unexpected status ${status}`);
  }
  samples.sort((a, b) => a - b);
  return {
    case: name,
    requests: iterations,
    'p50 ms': Number(percentile(samples, 50).toFixed(3)),
    'p99 ms': Number(percentile(samples, 99).toFixed(3)),
    note,
  };
}

async function tokenCase(
  dynamo: Awaited<ReturnType<typeof startDynalite>>,
  name: string,
  vend: { cacheTtlMs: number; quotaCacheMs: number },
  note: string,
): Promise<Row> {
  const h = await startVendHarness(dynamo, { vend });
  try {
    const event = fixture('get-token');
    await h.invoke(event); // the one login
    const readsBefore = h.store.reads;
    const row = await measure(name, 2000, async () => (await h.invoke(event)).statusCode, note);
    return { ...row, 'tokens-table reads': h.store.reads - readsBefore };
  } finally {
    await h.close();
  }
}

async function permitCase(dynamo: Awaited<ReturnType<typeof startDynalite>>): Promise<Row> {
  const h = await startVendHarness(dynamo);
  try {
    const { tokenId } = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token')));
    const event: VendEvent = withChanges(fixture('acquire-permits'), { body: { tokenId, count: 1 } });
    const readsBefore = h.store.reads;
    const row = await measure(
      'POST permits, grant of 1',
      1000,
      async () => {
        // 3.7 s of ledger time per request stays inside 50/min and 1000/h: every request is a grant.
        await h.clock.advance(3_700);
        return (await h.invoke(event)).statusCode;
      },
      'token check from memory, one conditional UpdateItem on the ledger item',
    );
    return { ...row, 'tokens-table reads': h.store.reads - readsBefore };
  } finally {
    await h.close();
  }
}

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const dynamo = await startDynalite();
  try {
    const rows = [
      await tokenCase(
        dynamo,
        'GET token, warm memory hit',
        { cacheTtlMs: 30_000, quotaCacheMs: 1_000 },
        'token and quota figures from memory (the defaults; the clock stands still)',
      ),
      await tokenCase(
        dynamo,
        'GET token, memory hit + quota read',
        { cacheTtlMs: 30_000, quotaCacheMs: 0 },
        'token from memory, quota figures read from the ledger (the first request after each second)',
      ),
      await tokenCase(
        dynamo,
        'GET token, DynamoDB hit',
        { cacheTtlMs: 0, quotaCacheMs: 0 },
        'tokens table read (consistent) and ledger read on every request',
      ),
      await permitCase(dynamo),
    ];
    return [{ title: 'vend handler latency (dynalite on 127.0.0.1, real clients, this machine)', rows }];
  } finally {
    await dynamo.close();
  }
}
