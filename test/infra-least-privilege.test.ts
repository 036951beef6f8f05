import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRefresherHandler } from '../functions/refresher-handler.js';
import { parseStageConfig, type StageInput } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { startSandbox } from '../sandbox/index.js';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import { MemoryTelemetry } from '../shared/observability.js';
import type { RefreshOutcome, RunSummary } from '../shared/tokens/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import {
  actionsOf,
  type Deployed,
  identityStatements,
  refOf,
  resourcesOf,
  type Statement,
  stageOf,
  synthesizeStages,
} from './support/infra-template.js';
import { credentialSet, SCHEDULED_EVENT, startWorld, whileAdvancing } from './support/refresher-harness.js';
import {
  fixture,
  getToken,
  parseBody,
  settleWithClock,
  startVendHarness,
  type TokenBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';

/**
 * Least privilege to the action: the DynamoDB actions each function's role is granted on each table are
 * exactly the commands its code sends there, recorded from the real code driven over every route and path,
 * both ways (a grant never used fails, a command not granted fails); the tables' key is usable only through
 * DynamoDB; and a stage on the vendor's prod environment is a production stage.
 */

type FunctionName = 'refresher' | 'vend';
type TableName = 'tokens' | 'ledger';
interface Sent {
  fn: FunctionName;
  /** The SDK command's name without `Command`: the IAM action's name. */
  command: string;
  table: string | undefined;
}

const sent: Sent[] = [];
/** Table names as created by the harnesses → which of the stack's tables each stands for. */
const tableRoles = new Map<string, TableName>();
/** What each path answered, to show the drive reached it (status codes, refresher outcomes). */
const outcomes: Record<string, unknown> = {};

/** A real DynamoDB client for dynalite that records every command it is asked to send, as `fn`. */
function recordingClient(endpoint: string, fn: FunctionName): DynamoDBClient {
  const client = createDynamoDbClient({ endpoint });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { TableName?: string };
      sent.push({
        fn,
        command: (context.commandName ?? 'unknown').replace(/Command$/, ''),
        table: input.TableName,
      });
      return next(args);
    },
    // Once per send, before retries: IAM authorises each attempt of a command with the same action.
    { step: 'initialize', name: 'recordCommands' },
  );
  return client;
}

/** The LocalDynamo a harness creates its tables with (unrecorded), its code's calls going through `client`. */
const through = (dynamo: LocalDynamo, client: DynamoDBClient): LocalDynamo => ({ ...dynamo, client });

const lambdaContext = { awsRequestId: 'c6af9ac6-7b61-11e6-9a41-93e812345678' } as Context;

/** The refresher on its own (the scheduled function): runs, on-demand refreshes, failures, contention. */
async function driveRefresher(dynamo: LocalDynamo): Promise<void> {
  const clock = new ManualClock(Date.UTC(2026, 0, 5, 9, 0, 0));
  const sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, tokenLifetimeSeconds: 3600 });
  try {
    const client = recordingClient(dynamo.endpoint, 'refresher');
    const world = await startWorld(clock, through(dynamo, client));
    tableRoles.set(world.table, 'tokens');
    const set = credentialSet({ id: 'uat-advisor', vendorBaseUrl: sandbox.url });
    world.storeCredentialsOf(set, 'uat-advisor', sandbox);
    const handler = createRefresherHandler({
      refresher: world.refresher('lambda-1', [set]),
      telemetry: new MemoryTelemetry(),
    });
    const run = async () => (await handler(SCHEDULED_EVENT, lambdaContext)) as RunSummary;
    const refresh = async (request: Record<string, unknown>) =>
      (await handler(
        { action: 'refresh', credentialSetId: set.id, ...request },
        lambdaContext,
      )) as RefreshOutcome;

    outcomes.scheduledLogin = (await run()).sets.map((s) => s.action);
    outcomes.scheduledFresh = (await run()).sets.map((s) => s.action);
    const current = (await world.store.read(set.id, clock.now()))?.current?.tokenId;
    await clock.advance(120_000);
    outcomes.onDemandRejected = (
      await refresh({ reason: 'TOKEN_REJECTED', rejectedTokenId: current })
    ).status;
    outcomes.onDemandValid = (await refresh({ reason: 'NO_USABLE_TOKEN', minValiditySeconds: 60 })).status;

    // A vendor outage, then a wrong password: the failure is recorded, the lease given back.
    await clock.advance(3_600_000);
    sandbox.update({ outage: true });
    outcomes.outage = (await run()).sets.map((s) => s.action);
    sandbox.update({ outage: false });
    await clock.advance(600_000);
    world.secrets.put(set.secretId, { username: 'uat-advisor', password: 'wrong' });
    outcomes.wrongPassword = (await run()).sets.map((s) => s.action);

    // Two refresher containers on a cold set: one takes the lease, the other waits for its login.
    const coldSet = credentialSet({ id: 'uat-cold', vendorBaseUrl: sandbox.url, secretId: 'cold' });
    world.storeCredentialsOf(coldSet, 'uat-advisor', sandbox);
    const containers = ['lambda-2', 'lambda-3'].map((holder) => world.refresher(holder, [coldSet]));
    const both = await whileAdvancing(
      clock,
      Promise.all(
        containers.map((r) => r.refreshOne({ credentialSetId: coldSet.id, reason: 'NO_USABLE_TOKEN' })),
      ),
    );
    outcomes.contention = both.map((o) => o.status);
  } finally {
    await sandbox.close();
  }
}

/** The vend function over every route, with the refresher as its own function (own client) behind it. */
async function driveVend(dynamo: LocalDynamo): Promise<void> {
  const start = async (options: Parameters<typeof startVendHarness>[1] = {}) => {
    const h = await startVendHarness(through(dynamo, recordingClient(dynamo.endpoint, 'vend')), {
      refresherClient: recordingClient(dynamo.endpoint, 'refresher'),
      ...options,
    });
    tableRoles.set(h.tokensTable, 'tokens');
    tableRoles.set(h.ledgerTable, 'ledger');
    return h;
  };
  const post = (h: VendHarness, name: string, body: unknown) =>
    h.invoke(withChanges(fixture(name), { body }));

  let h = await start({ reportLimits: { rateLimitReports: { perCaller: 1, perSet: 2 } } });
  try {
    const cold = await getToken(h);
    const { tokenId } = parseBody<TokenBody>(cold);
    outcomes.tokenCold = cold.statusCode;
    outcomes.tokenWarm = (await getToken(h)).statusCode;
    await h.clock.advance(1_500); // past the version check interval: a version read
    outcomes.tokenVersionChecked = (await getToken(h)).statusCode;
    outcomes.tokenBadQuery = (await getToken(h, 'minValiditySeconds=soon')).statusCode;
    outcomes.tokenOtherCaller = (await h.invoke(fixture('get-token-unknown-role'))).statusCode;
    outcomes.list = (await h.invoke(fixture('list-credential-sets'))).statusCode;

    const grant = await post(h, 'acquire-permits', { tokenId, count: 2 });
    outcomes.permitGranted = grant.statusCode;
    const { receipt } = parseBody<{ receipt: string }>(grant);
    outcomes.permitReturned = (await post(h, 'return-permits', { tokenId, count: 1, receipt })).statusCode;
    outcomes.permitReturnSpent = (await post(h, 'return-permits', { tokenId, count: 1, receipt })).statusCode;
    outcomes.permitsExhausted = (await post(h, 'acquire-permits', { tokenId, count: 49 })).statusCode;
    outcomes.permitDenied = (await post(h, 'acquire-permits', { tokenId, count: 1 })).statusCode;
    outcomes.permitUnknownToken = (
      await post(h, 'acquire-permits', { tokenId: 'f'.repeat(16), count: 1 })
    ).statusCode;

    outcomes.rateLimitReported = (
      await post(h, 'report-rate-limit', { tokenId, retryAfterSeconds: 1 })
    ).statusCode;
    outcomes.rateLimitReportLimited = (
      await post(h, 'report-rate-limit', { tokenId, retryAfterSeconds: 1 })
    ).statusCode;

    // A rejection: the set's re-login claim taken, a login; a second rejection within the interval: refused.
    await h.clock.advance(120_000);
    const rejection = { errorCode: 'TOKEN_INVALID' };
    const relogin = await post(h, 'report-token-rejection', { tokenId, ...rejection });
    outcomes.rejectionRelogin = relogin.statusCode;
    const replaced = parseBody<TokenBody>(relogin).tokenId;
    outcomes.rejectionReloginLimited = (
      await post(h, 'report-token-rejection', { tokenId: replaced, ...rejection })
    ).statusCode;
    // After the interval, during a vendor outage: claimed, no login, the claim given back.
    await h.clock.advance(301_000);
    h.sandbox.update({ outage: true });
    outcomes.rejectionClaimReleased = (
      await post(h, 'report-token-rejection', { tokenId: replaced, ...rejection })
    ).statusCode;
    h.sandbox.update({ outage: false });
  } finally {
    await h.close();
  }

  // A wrong password: the login fails, the set's health shows it.
  h = await start();
  try {
    h.credentials.set('broker/uat-advisor', { username: 'uat-advisor', password: 'wrong' }, 'v2');
    outcomes.tokenLoginRejected = (await getToken(h)).statusCode;
    outcomes.listAfterRejection = (await h.invoke(fixture('list-credential-sets'))).statusCode;
  } finally {
    await h.close();
  }

  // A learned class (docs/class-limits.md): the probe grants one; its answer, reported, teaches the limit (the
  // set's `learned#` item written whole on its version); the status reads it back.
  h = await start({ setOverrides: { rateLimits: { classes: { reports: [] } } } as never });
  try {
    const { tokenId } = parseBody<TokenBody>(await getToken(h));
    outcomes.classProbe = (
      await post(h, 'acquire-permits', { tokenId, count: 1, class: 'reports' })
    ).statusCode;
    const reset = Math.floor(h.clock.now() / 1000) + 45;
    const taught = { tokenId, class: 'reports', limit: 5, remaining: 4, reset };
    outcomes.classReportTaught = (await post(h, 'report-rate-limit', taught)).statusCode;
    outcomes.classPermitLearned = (
      await post(h, 'acquire-permits', { tokenId, count: 4, class: 'reports' })
    ).statusCode;
    outcomes.listLearned = (await h.invoke(fixture('list-credential-sets'))).statusCode;
  } finally {
    await h.close();
  }

  // Two vend containers on a cold cache: their refreshers contend for the set's lease.
  h = await start();
  try {
    const other = h.newContainer();
    const answers = await settleWithClock(h, [getToken(h), other.invoke(fixture('get-token'))]);
    outcomes.tokenContention = answers.map((a) => a.statusCode);
  } finally {
    await h.close();
  }
}

let dynamo: LocalDynamo;
let deployed: Record<string, Deployed> = {};

beforeAll(async () => {
  dynamo = await startDynalite();
  await driveRefresher(dynamo);
  await driveVend(dynamo);
  ({ deployed } = synthesizeStages());
}, 120_000);

afterAll(async () => {
  await dynamo?.close();
});

/** Sorted IAM actions per function and table: `{ refresher: { tokens: [...] }, ... }`. */
type Access = Record<string, Record<string, string[]>>;
function accessOf(entries: { fn: string; table: string; action: string }[]): Access {
  const access: Access = {};
  for (const { fn, table, action } of [...entries].sort((a, b) => a.action.localeCompare(b.action))) {
    const tables = access[fn] ?? {};
    const actions = tables[table] ?? [];
    if (!actions.includes(action)) actions.push(action);
    tables[table] = actions;
    access[fn] = tables;
  }
  return access;
}

describe('the DynamoDB calls of the functions', () => {
  it('are recorded over every route and path, each answered as a user would see it', () => {
    expect(outcomes).toEqual({
      scheduledLogin: ['LOGGED_IN'],
      scheduledFresh: ['FRESH'],
      onDemandRejected: 'CURRENT',
      onDemandValid: 'CURRENT',
      outage: ['FAILED'],
      wrongPassword: ['FAILED'],
      contention: ['CURRENT', 'CURRENT'],
      tokenCold: 200,
      tokenWarm: 200,
      tokenVersionChecked: 200,
      tokenBadQuery: 400,
      tokenOtherCaller: 403,
      list: 200,
      permitGranted: 200,
      permitReturned: 200,
      permitReturnSpent: 409,
      permitsExhausted: 200,
      permitDenied: 429,
      permitUnknownToken: 400,
      rateLimitReported: 204,
      rateLimitReportLimited: 429,
      rejectionRelogin: 200,
      rejectionReloginLimited: 429,
      rejectionClaimReleased: 503,
      tokenLoginRejected: 503,
      listAfterRejection: 200,
      classProbe: 200,
      classReportTaught: 204,
      classPermitLearned: 200,
      listLearned: 200,
      tokenContention: [200, 200],
    });
    expect(sent.filter((call) => call.table === undefined || !tableRoles.has(call.table))).toEqual([]);
  });
});

describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);

  it('grants each function exactly the DynamoDB actions its code sends, per table, and no other', () => {
    const { template, ids, json } = d();
    const outputs = json.Outputs as Record<string, { Value: unknown }>;
    const tableIds: Record<string, TableName> = {};
    const tokens = refOf(outputs.TokensTableName?.Value);
    const ledger = refOf(outputs.LedgerTableName?.Value);
    if (tokens) tableIds[tokens] = 'tokens';
    if (ledger) tableIds[ledger] = 'ledger';
    const roles: Record<string, FunctionName> = { [ids.refresherRole]: 'refresher', [ids.vendRole]: 'vend' };
    const granted = identityStatements(template).flatMap(({ roles: attached, statement }) =>
      attached
        .filter((role) => roles[role] !== undefined)
        .flatMap((role) =>
          actionsOf(statement)
            .filter((action) => action.startsWith('dynamodb:') || action === '*')
            .flatMap((action) =>
              resourcesOf(statement).map((resource) => ({
                fn: roles[role] as string,
                table: tableIds[refOf(resource) ?? ''] ?? `not a table: ${JSON.stringify(resource)}`,
                action,
              })),
            ),
        ),
    );
    const used = sent.map(({ fn, command, table }) => ({
      fn,
      table: tableRoles.get(table ?? '') ?? `unknown table ${table}`,
      action: `dynamodb:${command}`,
    }));
    expect(accessOf(granted)).toEqual(accessOf(used));
  });

  it("lets the functions use the tables' key only through DynamoDB in the stage's Region, to decrypt", () => {
    const { template, ids, stage } = d();
    const lambdaRoles = Object.entries(template.findResources('AWS::IAM::Role'))
      .filter(([, role]) =>
        JSON.stringify(role.Properties.AssumeRolePolicyDocument).includes('lambda.amazonaws.com'),
      )
      .map(([id]) => id);
    expect(lambdaRoles).toEqual(expect.arrayContaining([ids.refresherRole, ids.vendRole]));
    const keyIds = Object.keys(template.findResources('AWS::KMS::Key'));
    const kms = identityStatements(template).filter(
      ({ roles, statement }) =>
        roles.some((role) => lambdaRoles.includes(role)) &&
        actionsOf(statement).some((action) => action.startsWith('kms:') || action === '*'),
    );
    for (const role of [ids.refresherRole, ids.vendRole]) {
      expect(kms.filter(({ roles }) => roles.includes(role)).length, role).toBeGreaterThan(0);
    }
    for (const { statement } of kms) {
      const s = statement as Statement & { Condition?: unknown };
      expect(s.Effect).toBe('Allow');
      expect(actionsOf(s)).toEqual(['kms:Decrypt']);
      expect(resourcesOf(s).map(refOf)).toEqual(keyIds);
      expect(s.Condition).toEqual({
        StringEquals: { 'kms:ViaService': `dynamodb.${stage.region}.amazonaws.com` },
      });
    }
  });
});

describe('the production flag', () => {
  const withChange = (base: StageInput, change: Partial<StageInput>): StageInput => ({
    ...structuredClone(base),
    ...change,
  });

  it('is required for a stage on the vendor prod environment', () => {
    expect(() => parseStageConfig(withChange(prod, { production: false }))).toThrow(ConfigurationError);
    expect(() => parseStageConfig(withChange(prod, { production: false }))).toThrow(
      /invalid stage "prod": prod\.production: must be true in a stage for the vendor's "prod" environment/,
    );
    expect(parseStageConfig(prod).production).toBe(true);
  });

  it('may be on for a UAT stage (production-grade protection, harmless)', () => {
    expect(parseStageConfig(withChange(uat, { production: true })).production).toBe(true);
    expect(parseStageConfig(uat).production).toBe(false);
  });
});
