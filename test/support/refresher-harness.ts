import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  GetSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { ScheduledEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll } from 'vitest';
import {
  defaultSandboxUsers,
  type MutableSandboxSettings,
  type Sandbox,
  type SandboxSettings,
  startSandbox,
} from '../../sandbox/index.js';
import { type Clock, ManualClock } from '../../shared/clock.js';
import {
  type CredentialSetConfig,
  type CredentialSetInput,
  credentialSetSchema,
} from '../../shared/config/credential-sets.js';
import { SecretsManagerCredentialsSource } from '../../shared/credentials/index.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import { DynamoTokenStore, Refresher, type RefresherOptions } from '../../shared/tokens/index.js';
import { VendorClient } from '../../shared/vendor-client/client.js';
import type { VendorCredentials } from '../../shared/vendor-client/types.js';
import { type LocalDynamo, startDynalite } from './dynalite.js';
import type { Attempt } from './faulty-dynamodb.js';

/** A credential set as configuration would give it (every default filled in by the real schema). */
export function credentialSet(
  input: Partial<CredentialSetInput> & { id: string; vendorBaseUrl: string },
): CredentialSetConfig {
  return credentialSetSchema.parse({
    environment: 'uat',
    companyRole: 'advisor',
    secretId: `token-broker/${input.id}`,
    ...input,
  });
}

/**
 * Secrets Manager through aws-sdk-client-mock (there is no local Secrets Manager): `put` stores a new
 * version, as `PutSecretValue` would, and every GetSecretValue answers the latest one.
 */
export function fakeSecretsManager() {
  const client = new SecretsManagerClient({
    region: 'eu-west-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
  const mock = mockClient(client);
  const secrets = new Map<string, { text: string; versionId: string }>();
  let versions = 0;
  mock.on(GetSecretValueCommand).callsFake((input: { SecretId?: string }) => {
    const secret = secrets.get(input.SecretId ?? '');
    if (!secret) {
      throw new ResourceNotFoundException({
        message: "Secrets Manager can't find the specified secret.",
        $metadata: {},
      });
    }
    return { Name: input.SecretId, SecretString: secret.text, VersionId: secret.versionId };
  });
  return {
    client,
    mock,
    source: new SecretsManagerCredentialsSource({ client }),
    put(secretId: string, credentials: VendorCredentials | string): string {
      const versionId = `version-${++versions}`;
      secrets.set(secretId, {
        text: typeof credentials === 'string' ? credentials : JSON.stringify(credentials),
        versionId,
      });
      return versionId;
    },
    reads: () => mock.commandCalls(GetSecretValueCommand).length,
  };
}

/**
 * For the vendor client: the test's time, but retry waits pass at once. Within one scheduled tick time
 * stands still (a few seconds of client retries against 5-minute ticks); the client's attempts stay bounded
 * by its maxAttempts.
 */
export const instantSleeps = (clock: Clock): Clock => ({
  now: () => clock.now(),
  sleep: () => Promise.resolve(),
});

/**
 * Settles `work` while moving a ManualClock forward in steps, letting real I/O (dynalite, the sandbox) run
 * between steps: for code that polls on the clock (an on-demand refresh waiting for another process).
 */
export async function whileAdvancing<T>(
  clock: ManualClock,
  work: Promise<T>,
  stepMs = 250,
  realPauseMs = 10,
): Promise<T> {
  let settled = false;
  const done = work.finally(() => {
    settled = true;
  });
  while (!settled) {
    await new Promise((resolve) => setTimeout(resolve, realPauseMs));
    if (!settled && clock.pendingSleepers > 0) await clock.advance(stepMs);
  }
  return done;
}

/** Everything a leak check greps for: the sandbox passwords and JWTs. */
export function expectNoSecrets(text: string, secrets: readonly string[]): void {
  for (const secret of secrets) {
    if (text.includes(secret)) throw new Error(`a secret value leaked into: ${text.slice(0, 200)}…`);
  }
  if (/eyJ[\w-]+\.[\w-]+/.test(text)) throw new Error('a JWT leaked');
}

/** Tries per login the test vendor clients make (their retries pass at once: see instantSleeps). */
/** A scheduled refresher run's event, as AWS documents the event of an EventBridge rule with a schedule expression. */
export const SCHEDULED_EVENT: ScheduledEvent = {
  version: '0',
  id: '53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '123456789012',
  time: '2026-01-05T09:00:00Z',
  region: 'eu-west-1',
  resources: ['arn:aws:events:eu-west-1:123456789012:rule/token-broker-uat-Schedule'],
  detail: {},
};

export const VENDOR_CLIENT_ATTEMPTS = 2;

export interface World {
  clock: ManualClock;
  dynamo: LocalDynamo;
  table: string;
  store: DynamoTokenStore;
  secrets: ReturnType<typeof fakeSecretsManager>;
  telemetry: MemoryTelemetry;
  /** One Refresher = one process (a Lambda container): its own holder id and vendor clients. */
  refresher(
    holderId: string,
    sets: readonly CredentialSetConfig[],
    options?: Partial<RefresherOptions>,
  ): Refresher;
  /** Puts the sandbox user's real credentials into the set's secret; returns the version id. */
  storeCredentialsOf(set: CredentialSetConfig, username: string, sandbox: Sandbox): string;
}

/**
 * dynalite with a fresh tokens table, Secrets Manager through the mock, and a ManualClock everyone shares. The
 * store (and so every refresher) speaks to the table through `client` when given (a faulty one, say).
 */
export async function startWorld(
  clock: ManualClock,
  dynamo: LocalDynamo,
  options: { client?: DynamoDBClient } = {},
): Promise<World> {
  const table = await dynamo.createTable('tokens');
  const store = new DynamoTokenStore({ client: options.client ?? dynamo.client, tableName: table });
  const secrets = fakeSecretsManager();
  const telemetry = new MemoryTelemetry();
  return {
    clock,
    dynamo,
    table,
    store,
    secrets,
    telemetry,
    refresher(holderId, sets, options = {}) {
      const clients = new Map<string, VendorClient>();
      return new Refresher({
        sets,
        store,
        credentials: secrets.source,
        clock,
        telemetry,
        holderId,
        vendorFor(set) {
          let client = clients.get(set.vendorBaseUrl);
          if (!client) {
            client = new VendorClient({
              baseUrl: set.vendorBaseUrl,
              clock: instantSleeps(clock),
              retry: { maxAttempts: VENDOR_CLIENT_ATTEMPTS },
            });
            clients.set(set.vendorBaseUrl, client);
          }
          return client;
        },
        ...options,
      });
    },
    storeCredentialsOf(set, username, sandbox) {
      const user = defaultSandboxUsers(sandbox.environment).find((u) => u.username === username);
      if (!user) throw new Error(`no sandbox user ${username}`);
      return secrets.put(set.secretId, { username: user.username, password: user.password });
    },
  };
}

/**
 * The token store's writes as the fault middleware sees them (faulty-dynamodb.ts `aim`), told apart by the
 * values they set: the lease write (`takeLease`), and the lease holder's writes (`promote`, `recordFailure`).
 */
const writeSetting =
  (...placeholders: string[]) =>
  ({ command, input }: Attempt): boolean => {
    const values = (input.ExpressionAttributeValues as Record<string, unknown> | undefined) ?? {};
    return command === 'UpdateItem' && placeholders.every((placeholder) => placeholder in values);
  };
export const TOKEN_STORE_WRITES = {
  lease: writeSetting(':lease'),
  promote: writeSetting(':token', ':leaseId'),
  failure: writeSetting(':failure', ':leaseId'),
  holder: writeSetting(':leaseId'),
};

/** Every sandbox password: what must never appear in telemetry, summaries or errors. */
export const sandboxPasswords = (): string[] =>
  (['uat', 'prod'] as const).flatMap((env) => defaultSandboxUsers(env).map((u) => u.password));

export interface RefresherSuite {
  clock: ManualClock;
  dynamo: LocalDynamo;
  /** The uat sandbox, on `clock`. */
  uat: Sandbox;
  /** Before a test: the clock back at its start, the sandbox's `settings` applied (if given) and stats cleared. */
  reset(settings?: Partial<MutableSandboxSettings>): void;
  /** A fresh world and the set uat-advisor on the sandbox, its user's credentials stored unless told not to. */
  advisorWorld(options?: { storeCredentials?: boolean }): Promise<{ world: World; set: CredentialSetConfig }>;
}

/**
 * For a refresher test file, at its top level: one ManualClock at `t0`, and dynalite and a uat sandbox on
 * that clock, started before the file's tests and closed after them (`dynamo` and `uat` are there from then).
 */
export function refresherSuite(
  t0: number,
  sandbox: Omit<SandboxSettings, 'environment' | 'clock'> = {},
): RefresherSuite {
  const clock = new ManualClock(t0);
  let dynamo: LocalDynamo | undefined;
  let uat: Sandbox | undefined;
  beforeAll(async () => {
    dynamo = await startDynalite();
    uat = await startSandbox({ environment: 'uat', clock, quiet: true, ...sandbox });
  });
  afterAll(async () => {
    await uat?.close();
    await dynamo?.close();
  });
  const started = <T>(part: T | undefined): T => {
    if (part === undefined) throw new Error('refresherSuite: its parts start before the tests of the file');
    return part;
  };
  const suite: RefresherSuite = {
    clock,
    get dynamo() {
      return started(dynamo);
    },
    get uat() {
      return started(uat);
    },
    reset(settings) {
      clock.set(t0);
      if (settings) suite.uat.update(settings);
      suite.uat.resetStats();
    },
    async advisorWorld({ storeCredentials = true } = {}) {
      const world = await startWorld(clock, suite.dynamo);
      const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: suite.uat.url });
      if (storeCredentials) world.storeCredentialsOf(set, 'uat-advisor', suite.uat);
      return { world, set };
    },
  };
  return suite;
}
