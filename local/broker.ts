import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ResourceInUseException } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { type Sandbox, type SandboxSettings, startSandbox } from '../sandbox/index.js';
import { createDynamoDbClient, createTable } from '../shared/aws/dynamodb.js';
import { attachDateReference } from '../shared/aws/dynamodb-date-reference.js';
import { type Clock, systemClock } from '../shared/clock.js';
import { type CredentialSetConfig, credentialSetSchema } from '../shared/config/credential-sets.js';
import { FileCredentialsSource } from '../shared/credentials/index.js';
import { ConfigurationError } from '../shared/errors.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import type { Telemetry } from '../shared/observability.js';
import { DynamoTokenStore, Refresher, type RunSummary } from '../shared/tokens/index.js';
import { createVendHandler, InProcessRefreshInvoker } from '../shared/vend/index.js';
import { VendorClient } from '../shared/vendor-client/index.js';
import { VENDOR_ENVIRONMENTS, type VendorEnvironment } from '../shared/vendor-client/types.js';
import type { LoadedLocalConfig } from './config.js';
import { scaleCredentialSet } from './config.js';
import { type FunctionUrlServer, serveFunctionUrl } from './function-url-server.js';
import { SigV4Verifier } from './sigv4-verifier.js';

export const LOCAL_TOKENS_TABLE = 'token-broker-tokens';
export const LOCAL_LEDGER_TABLE = 'token-broker-ledger';

export interface LocalBroker {
  vendUrl: string;
  dynamoEndpoint: string;
  /** The local sandbox of each environment this broker started (none where a vendor URL is configured). */
  sandboxes: Partial<Record<VendorEnvironment, Sandbox>>;
  /** The credential sets as the broker runs them: vendor URLs resolved, times scaled. */
  sets: CredentialSetConfig[];
  refresher: Refresher;
  /** Runs the refresher once now (the schedule does it every interval). */
  refreshNow(): Promise<RunSummary>;
  close(): Promise<void>;
}

export interface LocalBrokerOptions {
  clock?: Clock;
  telemetry: Telemetry;
  /** Extra sandbox settings (tests, the soak: faults, window kind, limits). */
  sandbox?: Partial<Omit<SandboxSettings, 'environment'>>;
  /** Run the refresher on its interval (default true). */
  schedule?: boolean;
}

/** dynalite on a free loopback port, in memory or in `dataDir`. */
export async function startDynalite(
  dataDir: string | undefined,
): Promise<{ server: Server; endpoint: string }> {
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(dataDir ? { path: dataDir } : {}),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/**
 * The whole broker on one machine: dynalite (or the configured DynamoDB endpoint), one vendor sandbox per environment, the refresher on an
 * interval, and the vend handler behind a local Function URL that verifies SigV4 like AWS does. The handlers
 * are the same code as in Lambda; only the transport and the refresh invoker (in-process) differ.
 */
export async function startLocalBroker(
  config: LoadedLocalConfig,
  options: LocalBrokerOptions,
): Promise<LocalBroker> {
  const clock = options.clock ?? systemClock;
  const { telemetry } = options;
  const scale = config.timeScale;
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer().catch(() => undefined);
  };
  try {
    // An external endpoint (BROKER_DYNAMODB_ENDPOINT) is not ours to stop; dynalite is.
    const dynamo = config.dynamoDbEndpoint
      ? { server: undefined, endpoint: config.dynamoDbEndpoint }
      : await startDynalite(config.dataDir);
    const client = createDynamoDbClient({ endpoint: dynamo.endpoint });
    closers.push(
      async () =>
        new Promise<void>((resolve) => {
          client.destroy();
          if (dynamo.server) dynamo.server.close(() => resolve());
          else resolve();
        }),
    );
    for (const table of [LOCAL_TOKENS_TABLE, LOCAL_LEDGER_TABLE]) {
      await createTable(client, table).catch((error: unknown) => {
        if (!(error instanceof ResourceInUseException)) throw error;
      });
    }

    const sandboxes: Partial<Record<VendorEnvironment, Sandbox>> = {};
    // The vendor's windows compress with the broker's, the families' as the general ones.
    const scaled = (limits: readonly { limit: number; windowSeconds: number }[]) =>
      limits.map((l) => ({ limit: l.limit, windowSeconds: l.windowSeconds / scale }));
    for (const environment of VENDOR_ENVIRONMENTS) {
      if (!config.credentialSets.some((set) => set.environment === environment && !set.vendorBaseUrl))
        continue;
      const sandbox = await startSandbox({
        environment,
        clock,
        quiet: true,
        tokenLifetimeSeconds: config.sandbox.tokenLifetimeSeconds / scale,
        limits: scaled(config.sandbox.limits),
        windowKind: config.sandbox.windowKind,
        invalidatePreviousTokenOnLogin: config.sandbox.invalidatePreviousTokenOnLogin,
        families: config.sandbox.families.map((family) => ({ ...family, limits: scaled(family.limits) })),
        ...options.sandbox,
      });
      sandboxes[environment] = sandbox;
      closers.push(() => sandbox.close());
    }

    const sets = config.credentialSets.map((set) => {
      const scaled = scaleCredentialSet(
        credentialSetSchema.parse({
          ...set,
          vendorBaseUrl: set.vendorBaseUrl ?? sandboxes[set.environment]?.url,
        }),
        scale,
      );
      if (set.rateLimits?.reservations && !scaled.rateLimits.reservations)
        telemetry.warn(
          'reservations not kept at this time scale: the compressed ledger item would be too large',
          {
            credentialSet: set.id,
            timeScale: scale,
          },
        );
      try {
        planFor(scaled.rateLimits);
      } catch (error) {
        if (!(error instanceof ConfigurationError)) throw error;
        // Tokens are still served; every permit of the set is refused with this reason.
        telemetry.error('permits unavailable at this time scale (TIME_SCALE 120 or less keeps them)', {
          credentialSet: set.id,
          timeScale: scale,
          reason: error.message,
        });
      }
      return scaled;
    });
    // As in Lambda, ledger time follows DynamoDB's clock, and each login's vendor clock offset is measured against
    // it; not under a test's simulated clock, which the engine's real Date would find months away. One reference
    // for the client: the refresher and the ledger share it here.
    const dynamoClock = options.clock === undefined ? attachDateReference(client, systemClock) : undefined;
    const store = new DynamoTokenStore({ client, tableName: LOCAL_TOKENS_TABLE });
    const vendors = new Map(
      sets.map((set) => [set.id, new VendorClient({ baseUrl: set.vendorBaseUrl, clock, telemetry })]),
    );
    const refresher = new Refresher({
      sets,
      store,
      credentials: new FileCredentialsSource({ path: config.credentialsPath }),
      vendorFor: (set) =>
        vendors.get(set.id) ?? new VendorClient({ baseUrl: set.vendorBaseUrl, clock, telemetry }),
      clock,
      telemetry,
      ...(dynamoClock ? { dynamoClock } : {}),
    });
    const handler = createVendHandler({
      sets,
      consumers: config.consumers,
      operators: config.operators,
      store,
      ledger: new DynamoRateLedger({
        client,
        tableName: LOCAL_LEDGER_TABLE,
        clock,
        telemetry,
        ...(dynamoClock ? { reference: dynamoClock } : {}),
      }),
      refresher: new InProcessRefreshInvoker(refresher),
      // Report windows compress with the rest of time, like the refresher's intervals.
      reports: {
        client,
        tableName: LOCAL_LEDGER_TABLE,
        settings: { windowSeconds: 60 / scale, rejectionReloginIntervalSeconds: 300 / scale },
      },
      clock,
      telemetry,
      cacheTtlMs: Math.max(30_000 / scale, 100),
      nearThresholdTtlMs: Math.max(1_000 / scale, 50),
    });
    const server: FunctionUrlServer = await serveFunctionUrl({
      handler,
      verifier: new SigV4Verifier({ callers: config.callers, clock, region: config.region }),
      clock,
      port: config.port,
      onError: (error) => telemetry.error('vend handler failed', { error: String(error) }),
      // What a real Function URL keeps to itself: why it answered 403 Forbidden.
      onRefused: (refusal) => telemetry.warn('signature refused: 403 Forbidden', { ...refusal }),
    });
    closers.push(() => server.close());

    let running: Promise<RunSummary> | undefined;
    const refreshNow = () => {
      running ??= refresher.runScheduled().finally(() => {
        running = undefined;
      });
      return running;
    };
    if (options.schedule ?? true) {
      const tick = () =>
        void refreshNow().catch((error: unknown) =>
          telemetry.error('scheduled refresh failed', { error: String(error) }),
        );
      const timer = setInterval(tick, Math.max((config.refreshIntervalSeconds * 1000) / scale, 200));
      tick();
      closers.push(async () => {
        clearInterval(timer);
        await running?.catch(() => undefined);
      });
    }

    return {
      vendUrl: server.url,
      dynamoEndpoint: dynamo.endpoint,
      sandboxes,
      sets,
      refresher,
      refreshNow,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
