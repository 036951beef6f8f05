/**
 * Refresher figures for `npm run bench`: logins per set per token lifetime over 24 simulated hours, and the
 * DynamoDB reads and writes per set per scheduled run, with 1 and with 20 concurrent invocations per run.
 * Everything real but the clock: dynalite through the real client, the vendor sandbox over HTTP.
 */
import { startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { credentialSetSchema } from '../shared/config/credential-sets.js';
import type { CredentialsSource } from '../shared/credentials/credentials-source.js';
import { Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { DynamoTokenStore, Refresher, softThresholdSeconds } from '../shared/tokens/index.js';
import { VendorClient } from '../shared/vendor-client/client.js';
import { startDynalite } from '../test/support/dynalite.js';

const LIFETIME = 4 * 3600;
const PERIOD = 300;
const HOURS = 24;
const SET_IDS = ['uat-advisor', 'uat-execution'];

type Row = Record<string, string | number>;

async function simulate(invocationsPerRun: number): Promise<Row[]> {
  const clock = new ManualClock(Date.UTC(2026, 0, 5, 0, 0, 0));
  const dynamo = await startDynalite();
  const sandbox = await startSandbox({
    environment: 'uat',
    clock,
    quiet: true,
    tokenLifetimeSeconds: LIFETIME,
  });
  try {
    // Counted at the client, per set (from the item key): every command sent, and the conditional writes lost.
    const calls = new Map<string, { reads: number; writes: number; lostWrites: number }>();
    dynamo.client.middlewareStack.add(
      (next, context) => async (args) => {
        const key = (args.input as { Key?: { pk?: { S?: string } } }).Key?.pk?.S?.replace(/^set#/, '');
        const count = key ? (calls.get(key) ?? { reads: 0, writes: 0, lostWrites: 0 }) : undefined;
        if (key && count) calls.set(key, count);
        if (count && context.commandName === 'GetItemCommand') count.reads++;
        if (count && context.commandName === 'UpdateItemCommand') count.writes++;
        try {
          return await next(args);
        } catch (error) {
          if (count && (error as Error).name === 'ConditionalCheckFailedException') count.lostWrites++;
          throw error;
        }
      },
      { step: 'initialize', name: 'countTokenTableCalls' },
    );
    const table = await dynamo.createTable('tokens');
    const store = new DynamoTokenStore({ client: dynamo.client, tableName: table });
    const sets = SET_IDS.map((id) =>
      credentialSetSchema.parse({
        id,
        environment: 'uat',
        companyRole: id.split('-')[1],
        vendorBaseUrl: sandbox.url,
        secretId: id,
      }),
    );
    const passwords: Record<string, string> = {
      'uat-advisor': 'uat-advisor-sandbox-pw',
      'uat-execution': 'uat-execution-sandbox-pw',
    };
    const credentials: CredentialsSource = {
      read: async (secretId) => ({
        credentials: { username: secretId, password: passwords[secretId] ?? '' },
        versionId: 'v1',
      }),
    };
    const telemetry = new MemoryTelemetry();
    const instant = { now: () => clock.now(), sleep: () => Promise.resolve() };
    const invocations = Array.from({ length: invocationsPerRun }, (_, i) => {
      const vendor = new VendorClient({ baseUrl: sandbox.url, clock: instant });
      return new Refresher({
        sets,
        store,
        credentials,
        vendorFor: () => vendor,
        clock,
        telemetry,
        holderId: `c${i}`,
      });
    });
    const runs = (HOURS * 3600) / PERIOD;
    // Token ids as the runs report them (no extra reads): how many distinct tokens the logins produced.
    const tokens = new Map<string, Set<string>>(sets.map((set) => [set.id, new Set()]));
    const started = performance.now();
    for (let run = 0; run < runs; run++) {
      if (run > 0) await clock.advance(PERIOD * 1000);
      const summaries = await Promise.all(invocations.map((r) => r.runScheduled()));
      for (const part of summaries.flatMap((s) => s.sets)) {
        if (part.tokenId) tokens.get(part.credentialSetId)?.add(part.tokenId);
      }
    }
    const wallMs = performance.now() - started;
    return sets.map((set) => {
      const logins = telemetry.sum(Metric.LoginSuccess, { CredentialSet: set.id });
      const distinct = tokens.get(set.id)?.size ?? 0;
      const count = calls.get(set.id);
      return {
        'invocations per run': invocationsPerRun,
        set: set.id,
        'soft threshold (s)': softThresholdSeconds(set, LIFETIME),
        'vendor logins in 24 h': logins,
        'login requests the vendor saw': sandbox.stats().logins[set.id]?.attempts ?? 0,
        'distinct tokens': distinct,
        'logins per token lifetime': Number((logins / distinct).toFixed(2)),
        'DynamoDB reads per set per run': Number(((count?.reads ?? 0) / runs).toFixed(2)),
        'DynamoDB writes per set per run': Number(((count?.writes ?? 0) / runs).toFixed(3)),
        'of which lost (condition failed)': Number(((count?.lostWrites ?? 0) / runs).toFixed(3)),
        'wall time (ms)': Math.round(wallMs),
      };
    });
  } finally {
    await sandbox.close();
    await dynamo.close();
  }
}

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const rows = [...(await simulate(1)), ...(await simulate(20))];
  return [
    {
      title: `Refresher: ${HOURS} simulated hours, token lifetime ${LIFETIME / 3600} h, a run every ${PERIOD / 60} min (in-process runs; vendor sandbox over HTTP, dynalite)`,
      rows,
    },
  ];
}
