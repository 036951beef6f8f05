import { readFileSync } from 'node:fs';
import { type DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { type Sandbox, type SandboxSettings, startSandbox } from '../../sandbox/index.js';
import { ManualClock } from '../../shared/clock.js';
import {
  type ConsumerConfig,
  parseConsumers,
  requireReservedConsumers,
} from '../../shared/config/consumers.js';
import {
  type CredentialSetConfig,
  type CredentialSetInput,
  parseCredentialSets,
} from '../../shared/config/credential-sets.js';
import { type OperatorConfig, parseOperators } from '../../shared/config/operators.js';
import type { CredentialsSource } from '../../shared/credentials/credentials-source.js';
import { DynamoRateLedger } from '../../shared/ledger/index.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import { DynamoTokenStore } from '../../shared/tokens/dynamo-token-store.js';
import { Refresher } from '../../shared/tokens/refresher.js';
import type { TokenStore } from '../../shared/tokens/token-store.js';
import { InProcessRefreshInvoker, type RefreshInvoker } from '../../shared/vend/refresh-invoker.js';
import type { ReportLimitSettingsInput } from '../../shared/vend/report-limits.js';
import type { ErrorBody, VendResult } from '../../shared/vend/responses.js';
import { createVendHandler, type VendEvent, type VendHandlerDeps } from '../../shared/vend/vend-handler.js';
import { VendorClient } from '../../shared/vendor-client/client.js';
import type { VendorCredentials } from '../../shared/vendor-client/types.js';
import type { LocalDynamo } from './dynalite.js';
import { fixtureConsumers } from './fixture-consumers.js';

/** Function URL events as AWS delivers them (payload format 2.0, IAM auth), kept in test/fixtures/function-url. */
export function fixture(name: string): VendEvent {
  const url = new URL(`../fixtures/function-url/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')) as VendEvent;
}

export type EventChange = Partial<{
  method: string;
  path: string;
  query: string;
  /** An object is sent as JSON; a string as it is. */
  body: unknown;
  headers: Record<string, string | undefined>;
  callerArn: string;
  callerAccountId: string;
  requestId: string;
}>;

/** A copy of the event with parts changed the way a different request would change them. */
export function withChanges(event: VendEvent, change: EventChange): VendEvent {
  const copy = structuredClone(event);
  if (change.method !== undefined) copy.requestContext.http.method = change.method;
  if (change.path !== undefined) {
    copy.rawPath = change.path;
    copy.requestContext.http.path = change.path;
  }
  if (change.query !== undefined) copy.rawQueryString = change.query;
  if (change.body !== undefined) {
    copy.body = typeof change.body === 'string' ? change.body : JSON.stringify(change.body);
    copy.isBase64Encoded = false;
    copy.headers['content-type'] ??= 'application/json';
  }
  for (const [name, value] of Object.entries(change.headers ?? {})) {
    if (value === undefined) delete copy.headers[name];
    else copy.headers[name] = value;
  }
  if (change.callerArn !== undefined) copy.requestContext.authorizer.iam.userArn = change.callerArn;
  if (change.callerAccountId !== undefined)
    copy.requestContext.authorizer.iam.accountId = change.callerAccountId;
  if (change.requestId !== undefined) copy.requestContext.requestId = change.requestId;
  return copy;
}

/**
 * The default sets: two of the sandbox's users, and a spare set nobody in the fixtures may use. The spare logs
 * in with the advisor's secret, so it counts the quota as the advisor does (`quotaScope` of the overrides).
 */
export function harnessSets(
  vendorBaseUrl: string,
  overrides: Partial<CredentialSetInput> = {},
): CredentialSetConfig[] {
  const base = { environment: 'uat' as const, vendorBaseUrl };
  const scope = overrides.quotaScope === undefined ? {} : { quotaScope: overrides.quotaScope };
  return parseCredentialSets([
    { ...base, id: 'uat-advisor', companyRole: 'advisor', secretId: 'broker/uat-advisor', ...overrides },
    { ...base, id: 'uat-execution', companyRole: 'execution-platform', secretId: 'broker/uat-execution' },
    { ...base, id: 'uat-spare', companyRole: 'advisor', secretId: 'broker/uat-advisor', ...scope },
  ]);
}

/** The consumer rules of the fixtures' callers (raw input), and the spare set's owner. */
export const HARNESS_CONSUMERS: readonly ConsumerConfig[] = [
  fixtureConsumers.portfolio,
  fixtureConsumers.reporting,
  fixtureConsumers.batch,
  fixtureConsumers.gateway,
  {
    name: 'spare-owner',
    principalArn: 'arn:aws:iam::123456789012:role/spare-owner',
    credentialSets: ['uat-spare'],
  },
];

/** The consumers the fixtures' callers are (or are not); `input` instead of HARNESS_CONSUMERS when given. */
export function harnessConsumers(
  sets: CredentialSetConfig[],
  input: readonly ConsumerConfig[] = HARNESS_CONSUMERS,
): ConsumerConfig[] {
  const consumers = parseConsumers(
    input,
    sets.map((set) => set.id),
  );
  requireReservedConsumers(sets, consumers, 'harness credentialSets');
  return consumers;
}

/** Secrets in memory (Secrets Manager has no local part; the refresher reads them through this port). */
export class MemoryCredentials implements CredentialsSource {
  readonly secrets = new Map<string, { credentials: VendorCredentials; versionId: string }>();
  set(secretId: string, credentials: VendorCredentials, versionId = 'v1'): void {
    this.secrets.set(secretId, { credentials, versionId });
  }
  async read(secretId: string) {
    const entry = this.secrets.get(secretId);
    if (!entry) throw new Error(`no secret ${secretId}`);
    return entry;
  }
}

/** Counts what reaches the tokens table, to tell a memory hit from a DynamoDB read (or a version check). */
export class CountingStore implements Pick<TokenStore, 'read' | 'readVersion'> {
  reads = 0;
  versionReads = 0;
  constructor(readonly inner: TokenStore) {}
  read(setId: string, now: number) {
    this.reads++;
    return this.inner.read(setId, now);
  }
  readVersion(setId: string) {
    this.versionReads++;
    return this.inner.readVersion(setId);
  }
}

export interface VendHarness {
  clock: ManualClock;
  dynamo: LocalDynamo;
  sandbox: Sandbox;
  sets: CredentialSetConfig[];
  credentials: MemoryCredentials;
  store: CountingStore;
  tokenStore: DynamoTokenStore;
  refresher: Refresher;
  refreshInvoker: RefreshInvoker & { calls: number };
  ledger: DynamoRateLedger;
  ledgerTable: string;
  tokensTable: string;
  telemetry: MemoryTelemetry;
  handler: ReturnType<typeof createVendHandler>;
  invoke(event: VendEvent): Promise<VendResult>;
  /** Another Lambda container over the same tables and vendor: its own memory, refresher and ledger client. */
  newContainer(): { invoke(event: VendEvent): Promise<VendResult>; refreshInvoker: { calls: number } };
  ledgerItems(): Promise<number>;
  close(): Promise<void>;
}

/**
 * The vend API over real parts: DynamoDB (dynalite, real client), the vendor sandbox over HTTP, the real
 * refresher in-process (its login through the real vendor client), the real ledger, one ManualClock for all.
 */
export async function startVendHarness(
  dynamo: LocalDynamo,
  options: {
    sandbox?: Omit<SandboxSettings, 'environment' | 'clock'>;
    setOverrides?: Partial<CredentialSetInput>;
    vend?: Partial<
      Pick<
        VendHandlerDeps,
        | 'cacheTtlMs'
        | 'nearThresholdTtlMs'
        | 'versionCheckMs'
        | 'refreshWaitMs'
        | 'maxBodyBytes'
        | 'quotaCacheMs'
      >
    >;
    /** Report limits (defaults as in production). */
    reportLimits?: ReportLimitSettingsInput;
    clock?: ManualClock;
    /** Status-only principals (default: none). */
    operators?: OperatorConfig[];
    /** The consumer rules (raw input; default HARNESS_CONSUMERS). */
    consumers?: readonly ConsumerConfig[];
    /**
     * The in-process refresher's DynamoDB client (by default `dynamo.client`, as the vend side's): in AWS
     * the refresher is another function with its own role, so a test of what each sends gives it its own.
     */
    refresherClient?: DynamoDBClient;
  } = {},
): Promise<VendHarness> {
  const clock = options.clock ?? new ManualClock();
  const sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, ...options.sandbox });
  const sets = harnessSets(sandbox.url, options.setOverrides);
  const credentials = new MemoryCredentials();
  credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'uat-advisor-sandbox-pw' });
  credentials.set('broker/uat-execution', {
    username: 'uat-execution',
    password: 'uat-execution-sandbox-pw',
  });
  const tokensTable = await dynamo.createTable('tokens');
  const ledgerTable = await dynamo.createTable('ledger');
  const tokenStore = new DynamoTokenStore({ client: dynamo.client, tableName: tokensTable });
  const store = new CountingStore(tokenStore);
  const refresherStore = options.refresherClient
    ? new DynamoTokenStore({ client: options.refresherClient, tableName: tokensTable })
    : tokenStore;
  const telemetry = new MemoryTelemetry();
  const consumers = harnessConsumers(sets, options.consumers);
  const operators = parseOperators(
    options.operators ?? [],
    sets.map((set) => set.id),
  );
  const container = (holderId?: string) => {
    const refresher = new Refresher({
      sets,
      store: refresherStore,
      credentials,
      // One attempt per login: a retry would sleep on the ManualClock, which only the test moves.
      vendorFor: (set) => new VendorClient({ baseUrl: set.vendorBaseUrl, clock, retry: { maxAttempts: 1 } }),
      clock,
      telemetry,
      ...(holderId ? { holderId } : {}),
    });
    const inProcess = new InProcessRefreshInvoker(refresher);
    const refreshInvoker = {
      calls: 0,
      refresh(request: Parameters<RefreshInvoker['refresh']>[0]) {
        refreshInvoker.calls++;
        return inProcess.refresh(request);
      },
    };
    const ledger = new DynamoRateLedger({ client: dynamo.client, tableName: ledgerTable, clock, telemetry });
    const handler = createVendHandler({
      sets,
      consumers,
      operators,
      store,
      ledger,
      refresher: refreshInvoker,
      reports: {
        client: dynamo.client,
        tableName: ledgerTable,
        ...(options.reportLimits ? { settings: options.reportLimits } : {}),
      },
      clock,
      telemetry,
      ...options.vend,
    });
    return { refresher, refreshInvoker, ledger, handler };
  };
  const { refresher, refreshInvoker, ledger, handler } = container();
  let containers = 0;
  const context = { awsRequestId: 'lambda-context-request-id' } as Context;
  return {
    clock,
    dynamo,
    sandbox,
    sets,
    credentials,
    store,
    tokenStore,
    refresher,
    refreshInvoker,
    ledger,
    ledgerTable,
    tokensTable,
    telemetry,
    handler,
    invoke: (event) => handler(event, context),
    newContainer() {
      const other = container(`container-${++containers}`);
      return { invoke: (event) => other.handler(event, context), refreshInvoker: other.refreshInvoker };
    },
    async ledgerItems() {
      const scan = await dynamo.client.send(new ScanCommand({ TableName: ledgerTable, Select: 'COUNT' }));
      return scan.Count ?? 0;
    },
    close: () => sandbox.close(),
  };
}

/** The portfolio caller's GET token for uat-advisor; with `query`, that query string instead of the fixture's. */
export const getToken = (h: VendHarness, query?: string) =>
  h.invoke(query === undefined ? fixture('get-token') : withChanges(fixture('get-token'), { query }));

/**
 * Settles requests while moving the harness clock in small steps, with a tiny real pause for the HTTP and
 * DynamoDB I/O in between: a refresher waiting for another container's login polls on the clock.
 */
export async function settleWithClock(
  h: VendHarness,
  requests: Promise<VendResult>[],
): Promise<VendResult[]> {
  let done = false;
  const all = Promise.all(requests).finally(() => {
    done = true;
  });
  while (!done) {
    await h.clock.advance(20);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return all;
}

/** Successful vendor logins of the sandbox user uat-advisor. */
export const advisorLogins = (h: VendHarness) => h.sandbox.stats().logins['uat-advisor']?.successes ?? 0;

/** The body of a token answer (GET token, rejection reports). */
export interface TokenBody {
  credentialSet: string;
  environment: string;
  accessToken: string;
  tokenId: string;
  expiresAt: number;
  expiresInSeconds: number;
  tenant: string;
  companyKey: string;
  executionPlatformKey: string;
  userKey: string;
  vendorBaseUrl: string;
  quota: { limit: number; windowSeconds: number; remaining: number }[] | null;
  reloggedIn?: boolean;
}

export const parseBody = <T = Record<string, unknown>>(result: VendResult): T =>
  JSON.parse(result.body ?? 'null') as T;

/** Asserts-by-return: the body is the vendor's error shape, for the status answered, and nothing else. */
export function errorBodyProblems(result: VendResult): string[] {
  const problems: string[] = [];
  let body: Partial<ErrorBody> & Record<string, unknown>;
  try {
    body = JSON.parse(result.body ?? '') as typeof body;
  } catch {
    return ['body is not JSON'];
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return ['body is not an object'];
  if (body.errorStatus !== result.statusCode) problems.push('errorStatus differs from the status');
  if (typeof body.errorCode !== 'string' || !/^[A-Z][A-Z_]+$/.test(body.errorCode))
    problems.push('errorCode');
  if (typeof body.errorMessage !== 'string' || body.errorMessage.length === 0) problems.push('errorMessage');
  if (typeof body.timestamp !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(body.timestamp))
    problems.push('timestamp');
  if (typeof body.requestId !== 'string' || body.requestId.length === 0) problems.push('requestId');
  const extra = Object.keys(body).filter(
    (key) => !['errorStatus', 'errorCode', 'errorMessage', 'timestamp', 'requestId', 'details'].includes(key),
  );
  if (extra.length > 0) problems.push(`unexpected fields ${extra.join(',')}`);
  if (result.headers['content-type'] !== 'application/json') problems.push('content-type');
  return problems;
}
