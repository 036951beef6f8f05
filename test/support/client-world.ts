import { BrokerClient } from '../../client/broker-client.js';
import type { BrokerClientOptions } from '../../client/types.js';
import { type FunctionUrlServer, serveFunctionUrl } from '../../local/function-url-server.js';
import { type LocalCaller, SigV4Verifier } from '../../local/sigv4-verifier.js';
import { type Sandbox, type SandboxSettings, startSandbox } from '../../sandbox/index.js';
import { ManualClock } from '../../shared/clock.js';
import type { CredentialSetConfig, CredentialSetInput } from '../../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../../shared/ledger/index.js';
import type { WindowRemaining } from '../../shared/ledger/types.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import type { Refresher } from '../../shared/tokens/index.js';
import { InProcessRefreshInvoker } from '../../shared/vend/refresh-invoker.js';
import { createVendHandler } from '../../shared/vend/vend-handler.js';
import { type LocalDynamo, startDynalite } from './dynalite.js';
import { type Engine, startEngine } from './engines.js';
import { credentialSet, startWorld, type World } from './refresher-harness.js';

/**
 * The whole broker on 127.0.0.1 for the consumer library's tests: the vendor sandbox, dynalite (tokens and
 * ledger tables), the refresher in-process, the real vend handler behind the local Function URL server with
 * SigV4 verification, all on one ManualClock. Every broker request the clients send is recorded.
 */

export const REGION = 'eu-west-1';
export const SET_ID = 'uat-advisor';
export const TENANT = 'uat-advisor-tenant';

export const consumerCaller: LocalCaller = {
  accessKeyId: 'AKIACLIENTTESTCALLER',
  secretAccessKey: 'client-test-secret-access-key',
  principalArn: 'arn:aws:iam::123456789012:role/portfolio-service',
};
/** A second consumer of the set ('reporting'): for sets where one consumer holds a reservation and one not. */
export const reportingCaller: LocalCaller = {
  accessKeyId: 'AKIACLIENTREPORTING1',
  secretAccessKey: 'client-test-reporting-secret-key',
  principalArn: 'arn:aws:iam::123456789012:role/reporting-service',
};
/** Signs correctly, but no consumer rule names it. */
export const strangerCaller: LocalCaller = {
  accessKeyId: 'AKIACLIENTSTRANGER01',
  secretAccessKey: 'client-test-stranger-secret-key',
  principalArn: 'arn:aws:iam::123456789012:role/somebody-else',
};

export interface BrokerCall {
  method: string;
  /** Path without the query. */
  path: string;
  query: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read the bodies they sent
  body: any;
}

export interface BrokerWorld {
  clock: ManualClock;
  sandbox: Sandbox;
  dynamo: LocalDynamo;
  world: World;
  set: CredentialSetConfig;
  refresher: Refresher;
  ledger: DynamoRateLedger;
  /** The vend handler's telemetry. */
  brokerTelemetry: MemoryTelemetry;
  server: FunctionUrlServer;
  /** Every request a client of this world sent to the broker, in order. */
  calls: BrokerCall[];
  callsTo(method: string, pathEnd: string): BrokerCall[];
  /** A fetch that records broker requests (vendor requests pass through unrecorded). */
  fetch: typeof fetch;
  client(options?: Partial<BrokerClientOptions>): BrokerClient;
  remaining(tokenId: string): Promise<WindowRemaining[]>;
  close(): Promise<void>;
}

export async function startBrokerWorld(
  options: {
    sandbox?: Partial<SandboxSettings>;
    set?: Partial<CredentialSetInput>;
    /** The DynamoDB engine of the tables (default: dynalite, or TEST_DYNAMO_ENDPOINT's). */
    engine?: Engine;
  } = {},
): Promise<BrokerWorld> {
  const clock = new ManualClock();
  const sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, ...options.sandbox });
  const dynamo = options.engine ? await startEngine(options.engine) : await startDynalite();
  const world = await startWorld(clock, dynamo);
  const set = credentialSet({ id: SET_ID, vendorBaseUrl: sandbox.url, ...options.set });
  world.storeCredentialsOf(set, 'uat-advisor', sandbox);
  const refresher = world.refresher('vend-test', [set]);
  await refresher.runScheduled();
  // The broker has been up for a while: its first login is older than the refresher's storm guard (60 s).
  await clock.advance(61_000);
  // Tests count what the clients cause, not the broker's own first login.
  sandbox.resetStats();
  const ledgerTable = await dynamo.createTable('ledger');
  const ledger = new DynamoRateLedger({ client: dynamo.client, tableName: ledgerTable, clock });
  const brokerTelemetry = new MemoryTelemetry();
  const handler = createVendHandler({
    sets: [set],
    consumers: [
      { name: 'portfolio', principalArn: consumerCaller.principalArn, credentialSets: [set.id] },
      { name: 'reporting', principalArn: reportingCaller.principalArn, credentialSets: [set.id] },
    ],
    store: world.store,
    ledger,
    refresher: new InProcessRefreshInvoker(refresher),
    reports: { client: dynamo.client, tableName: ledgerTable },
    clock,
    telemetry: brokerTelemetry,
  });
  const server = await serveFunctionUrl({
    handler,
    verifier: new SigV4Verifier({
      callers: [consumerCaller, reportingCaller, strangerCaller],
      clock,
      region: REGION,
    }),
    clock,
  });
  const calls: BrokerCall[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if (url.origin === server.url) {
      const text = typeof init?.body === 'string' ? init.body : undefined;
      calls.push({
        method: init?.method ?? 'GET',
        path: url.pathname,
        query: url.search,
        body: text === undefined ? undefined : JSON.parse(text),
      });
    }
    return fetch(input, init);
  };
  const clients: BrokerClient[] = [];
  return {
    clock,
    sandbox,
    dynamo,
    world,
    set,
    refresher,
    ledger,
    brokerTelemetry,
    server,
    calls,
    callsTo: (method, pathEnd) => calls.filter((c) => c.method === method && c.path.endsWith(pathEnd)),
    fetch: recordingFetch,
    client(overrides = {}) {
      const client = new BrokerClient({
        brokerUrl: server.url,
        region: REGION,
        credentials: consumerCaller,
        clock,
        fetch: recordingFetch,
        vendorBaseUrls: { [SET_ID]: sandbox.url },
        ...overrides,
      });
      clients.push(client);
      return client;
    },
    remaining: (tokenId) => ledger.remaining(tokenId, set.rateLimits),
    async close() {
      await Promise.allSettled(clients.map((c) => c.close()));
      await server.close();
      await sandbox.close();
      await dynamo.close();
    },
  };
}

/** The general per-minute window's remaining count. */
export const minuteRemaining = (windows: readonly WindowRemaining[]): number | undefined =>
  windows.find((w) => w.class === undefined && w.windowSeconds === 60)?.remaining;

/**
 * Waits (real time) until `check` holds: for work the library does in the background over real I/O. The
 * deadline bounds a hang; it is not a timing, so it is generous (a loaded 2-core machine is slow, not wrong).
 */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export interface DrivenClient {
  client: BrokerClient;
  /** Broker requests of this client sent and not yet answered (body read). */
  readonly inFlight: number;
  /**
   * Moves the clock `stepMs` at a time, only while every broker request of the client has been answered (so a
   * grant never ages on its way and the order of events is the program's, not the machine's), until `work`
   * settles.
   */
  drive<T>(work: Promise<T>, stepMs?: number): Promise<T>;
}

/**
 * A client of the world whose requests are counted while on their way, and a clock driver using it. `under`:
 * the fetch the counted requests go through (default: the world's, which records broker requests).
 */
export function drivenClient(
  w: BrokerWorld,
  overrides: Partial<BrokerClientOptions> = {},
  under: typeof fetch = w.fetch,
): DrivenClient {
  let inFlight = 0;
  const counting: typeof fetch = async (input, init) => {
    inFlight++;
    try {
      // The body is read here: once the count is back to 0, only this process's own work is left.
      const response = await under(input, init);
      const body = await response.arrayBuffer();
      // A 204 (a rate-limit report's answer) may not be rebuilt with a body, even an empty one.
      const nullBody = response.status === 204 || response.status === 205 || response.status === 304;
      return new Response(nullBody ? null : body, { status: response.status, headers: response.headers });
    } finally {
      inFlight--;
    }
  };
  const client = w.client({ fetch: counting, retry: { random: () => 0 }, ...overrides });
  return {
    client,
    get inFlight() {
      return inFlight;
    },
    async drive(work, stepMs = 1000) {
      let settled = false;
      const done = work.finally(() => {
        settled = true;
      });
      done.catch(() => undefined);
      while (!settled) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (!settled && inFlight === 0 && w.clock.pendingSleepers > 0) await w.clock.advance(stepMs);
      }
      return done;
    },
  };
}
