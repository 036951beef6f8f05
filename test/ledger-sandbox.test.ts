import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { idealGrantTimes, seededRandom } from './support/ledger-harness.js';
import { propertyRuns } from './support/property-runs.js';

/**
 * Consumers that acquire a permit before each vendor call never see a 429, whether the vendor's windows are
 * fixed or sliding. Windows are compressed (50 per 6 s, 1000 per 360 s) and the sandbox and the ledger share
 * one ManualClock, so compressed hours run in seconds: one in `npm test` (the first hour of test:long's run, the
 * same seed), three in `npm run test:long` (docs/testing.md).
 */
const vendorLimits = [
  { limit: 50, windowSeconds: 6 },
  { limit: 1000, windowSeconds: 360 },
];
// Margin and validity compressed with the windows; the margin also covers the clock moving while a request
// is in flight (at most one clock step, 100 ms here).
const limits = rateLimitSettingsSchema.parse({
  general: vendorLimits,
  marginSeconds: 0.5,
  permitValiditySeconds: 0.25,
});
const PROCESSES = 3;
const CONSUMERS_PER_PROCESS = 3;
const HOURS = propertyRuns({ quick: 1, full: 3 });
const RUN_MS = HOURS * 360_000;

describe('rate ledger in front of the vendor sandbox', () => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  it.each(['fixed', 'sliding'] as const)(
    'consumers that acquire before each call get no 429 (%s windows), under demand above the quota',
    async (windowKind) => {
      const random = seededRandom(windowKind === 'fixed' ? 11 : 12);
      const clock = new ManualClock();
      const sandbox: Sandbox = await startSandbox({
        environment: 'uat',
        limits: vendorLimits,
        windowKind,
        clock,
        quiet: true,
        random,
      });
      try {
        const login = await fetch(`${sandbox.url}/restful/login/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'uat-advisor', password: 'uat-advisor-sandbox-pw' }),
        });
        expect(login.status).toBe(200);
        const { accessToken, tenant } = (await login.json()) as { accessToken: string; tenant: string };
        const tokenId = createHash('sha256').update(accessToken).digest('hex').slice(0, 16);
        const table = await dynamo.createTable(`ledger-sandbox-${windowKind}`);
        const ledgers = Array.from(
          { length: PROCESSES },
          () => new DynamoRateLedger({ client: dynamo.client, tableName: table, clock }),
        );
        const statuses: Record<number, number> = {};
        let sent = 0;
        const denialsByHour = Array.from({ length: HOURS + 1 }, () => 0);
        let expiredUnsent = 0;
        let stopped = false;
        const start = clock.now();

        const consumer = async (ledger: DynamoRateLedger, index: number) => {
          while (!stopped) {
            const decision = await ledger.acquire({ tokenId, count: 1, limits });
            if (!decision.granted) {
              const hour = Math.min(HOURS, Math.floor((clock.now() - start) / 360_000));
              denialsByHour[hour] = (denialsByHour[hour] ?? 0) + 1;
              await clock.sleep(decision.retryAfterMs);
              continue;
            }
            if (clock.now() > decision.validUntil) {
              // Too late to use: hand it back instead of sending outside its validity.
              expiredUnsent++;
              await ledger.giveBack({ tokenId, count: 1, receipt: decision.receipt, limits });
              continue;
            }
            const answer = await fetch(`${sandbox.url}/users/1/${tenant}/serviceKey/key-${index}`, {
              headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
            });
            await answer.arrayBuffer();
            sent++;
            statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
          }
        };
        const consumers = ledgers.flatMap((ledger, p) =>
          Array.from({ length: CONSUMERS_PER_PROCESS }, (_, c) =>
            consumer(ledger, p * CONSUMERS_PER_PROCESS + c),
          ),
        );
        const everyoneWaiting = async () => {
          while (clock.pendingSleepers < consumers.length) await new Promise((r) => setImmediate(r));
        };
        while (clock.now() < start + RUN_MS) {
          await everyoneWaiting();
          await clock.advance(1 + Math.floor(random() * 100));
        }
        await everyoneWaiting();
        stopped = true;
        await clock.advance(3600_000);
        await Promise.all(consumers);

        const stats = sandbox.stats();
        const allowed = idealGrantTimes(
          vendorLimits.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 })),
          start,
          start + RUN_MS,
        ).length;
        console.info(
          JSON.stringify({ windowKind, sent, allowed, denialsByHour, expiredUnsent, statuses, stats }),
        );
        expect(stats.responsesByStatus['429'] ?? 0).toBe(0);
        expect(stats.errorsByCode.RATE_LIMIT_EXCEEDED ?? 0).toBe(0);
        expect(statuses).toEqual({ 404: sent });
        expect(Object.values(stats.requestsByToken)).toEqual([sent]);
        // Demand above the quota: consumers were turned away in every compressed hour, and the vendor still
        // got nearly all that its limits allow over the run (`allowed`: the best possible schedule).
        for (let hour = 0; hour < HOURS; hour++) expect(denialsByHour[hour]).toBeGreaterThan(50);
        expect(sent / allowed).toBeGreaterThanOrEqual(0.97);
      } finally {
        await sandbox.close();
      }
    },
    120_000,
  );
});
