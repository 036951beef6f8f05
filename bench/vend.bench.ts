/**
 * Vend API figures for `npm run bench`, two ways:
 * - In-process: the handler called as a function (no HTTP, no SigV4), latency around the call (what the
 *   Lambda runtime would measure once the request has reached the function), on a ManualClock that stands
 *   still: a token served from the function's memory, a token read from DynamoDB on every request, a permit
 *   grant. dynalite through the real DynamoDB client, the vendor sandbox over HTTP for the one login.
 * - Over HTTP + SigV4: the local broker (local/broker.ts, the same handler behind a local Function URL that
 *   verifies SigV4 as AWS does) on the real clock, asked by the client library's BrokerApi (signs each request,
 *   fetch over 127.0.0.1, checks the answer's shape): what a consumer waits for a warm request, minus the
 *   network between it and AWS. BrokerClient's own token cache is bypassed, so every call is a request.
 */
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { BrokerApi } from '../client/broker-api.js';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { startLocalBroker } from '../local/broker.js';
import { type LoadedLocalConfig, loadLocalConfig } from '../local/config.js';
import { systemClock } from '../shared/clock.js';
import { MemoryTelemetry } from '../shared/observability.js';
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
      'POST permits in-process, grant of 1',
      1000,
      async () => {
        // 3.7 s of ledger time per request stays inside 50/min and 1000/h: every request is a grant.
        await h.clock.advance(3_700);
        return (await h.invoke(event)).statusCode;
      },
      'handler call, no HTTP/SigV4: token check from memory, one conditional UpdateItem on the ledger item',
    );
    return { ...row, 'tokens-table reads': h.store.reads - readsBefore };
  } finally {
    await h.close();
  }
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HTTP_SET = 'uat-advisor';

/** The local broker's own configuration, one set, limits out of reach so that every permit request is a grant. */
function httpConfig(): LoadedLocalConfig {
  const base = loadLocalConfig({}, repoRoot);
  return {
    ...base,
    port: 0,
    timeScale: 1,
    credentialSets: base.credentialSets
      .filter((set) => set.id === HTTP_SET)
      .map((set) => ({
        ...set,
        rateLimits: { ...set.rateLimits, general: [{ limit: 36 ** 4 - 1, windowSeconds: 3600 }] },
      })),
  };
}

async function httpCases(): Promise<Row[]> {
  const config = httpConfig();
  const broker = await startLocalBroker(config, { telemetry: new MemoryTelemetry(), schedule: false });
  try {
    await broker.refreshNow(); // the one login
    const caller = config.callers.find((c) =>
      config.consumers.some((k) => k.principalArn === c.principalArn && k.credentialSets.includes(HTTP_SET)),
    );
    if (!caller) throw new Error(`no local caller may use ${HTTP_SET}`);
    const api = new BrokerApi({
      baseUrl: broker.vendUrl,
      signer: new FunctionUrlSigner({
        region: config.region,
        credentials: { accessKeyId: caller.accessKeyId, secretAccessKey: caller.secretAccessKey },
      }),
      clock: systemClock,
      fetch,
      timeoutMs: 5_000,
      userAgent: 'token-broker-bench',
    });
    const { tokenId } = await api.getToken(HTTP_SET, undefined);
    return [
      await measure(
        'GET token over HTTP + SigV4, warm',
        2000,
        async () => {
          await api.getToken(HTTP_SET, undefined);
          return 200;
        },
        'local broker, real clock: sign, fetch, SigV4 check, handler (token from memory, quota figures read once a second), shape check',
      ),
      await measure(
        'POST permits over HTTP + SigV4, grant of 1',
        1000,
        async () => {
          await api.acquirePermits(HTTP_SET, { tokenId, count: 1 });
          return 200;
        },
        'local broker, real clock, limits out of reach: as above plus one conditional UpdateItem on the ledger item',
      ),
    ];
  } finally {
    await broker.close();
  }
}

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const dynamo = await startDynalite();
  let inProcess: Row[];
  try {
    inProcess = [
      await tokenCase(
        dynamo,
        'GET token in-process, warm memory hit',
        { cacheTtlMs: 30_000, quotaCacheMs: 1_000 },
        'handler call, no HTTP/SigV4: token and quota figures from memory (the defaults; the clock stands still)',
      ),
      await tokenCase(
        dynamo,
        'GET token in-process, memory hit + quota read',
        { cacheTtlMs: 30_000, quotaCacheMs: 0 },
        'handler call, no HTTP/SigV4: token from memory, quota figures read from the ledger',
      ),
      await tokenCase(
        dynamo,
        'GET token in-process, DynamoDB hit',
        { cacheTtlMs: 0, quotaCacheMs: 0 },
        'handler call, no HTTP/SigV4: tokens table read (consistent) and ledger read on every request',
      ),
      await permitCase(dynamo),
    ];
  } finally {
    await dynamo.close();
  }
  return [
    {
      title:
        'vend handler latency (real time around the call), IN-PROCESS (no HTTP, no SigV4); the handler on a simulated clock; dynalite on 127.0.0.1, this machine',
      rows: inProcess,
    },
    {
      title:
        'vend API latency (real time around the request) over HTTP + SigV4: local broker on 127.0.0.1 on the real clock, dynalite, this machine',
      rows: await httpCases(),
    },
  ];
}
