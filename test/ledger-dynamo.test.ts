import { createServer } from 'node:net';
import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, LedgerUnavailableError, type PermitDecision } from '../shared/ledger/index.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import { callerTag } from '../shared/ledger/receipts.js';
import { MemoryTelemetry } from '../shared/observability.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import {
  countDynamoCalls,
  denied,
  dynamoItemSize,
  fillLedgerItem,
  granted,
} from './support/ledger-harness.js';
import { propertyRuns } from './support/property-runs.js';

/** With a class, in item format 2 (packed): the format that keeps a class within one write unit. */
const limits: RateLimitSettings = rateLimitSettingsSchema.parse({
  itemFormat: 2,
  classes: { reports: [{ limit: 10, windowSeconds: 60 }] },
});
const TOKEN = '3f9a0c1d2b4e5f60';
/** The default margin and validity: a minute's grants are counted over 60 s plus the margin. */
const MARGIN_MS = limits.marginSeconds * 1000;
const VALIDITY_MS = limits.permitValiditySeconds * 1000;
/**
 * Steps of the adversarial use (a permit every 4 s, a two-process sweep every 600): `npm test` runs the first 1200
 * (80 minutes: the hour's rings all in use, two sweeps), test:long all 2400 (four sweeps).
 */
const ADVERSARIAL_STEPS = propertyRuns({ quick: 1200, full: 2400 });

describe.each(ENGINES)('DynamoRateLedger on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  let counter: ReturnType<typeof countDynamoCalls>;
  let table: string;
  let clock: ManualClock;
  const ledger = (options: Partial<ConstructorParameters<typeof DynamoRateLedger>[0]> = {}) =>
    new DynamoRateLedger({ client, tableName: table, clock, random: () => 0, ...options });
  const item = async (tokenId = TOKEN) =>
    (await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: `token#${tokenId}` } } })))
      .Item;

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
    counter = countDynamoCalls(client);
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    table = await dynamo.createTable('ledger');
    clock = new ManualClock();
    counter.reset();
  });

  it('grants with one conditional write, and denies without writing', async () => {
    const one = ledger();
    const grant = granted(await one.acquire({ tokenId: TOKEN, count: 50, limits }));
    expect(grant).toMatchObject({ count: 50, grantedAt: clock.now(), validUntil: clock.now() + VALIDITY_MS });
    expect(grant.remaining).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 0 },
      { limit: 1000, windowSeconds: 3600, remaining: 950 },
    ]);
    expect(counter.writes()).toBe(1);
    const no = denied(await one.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no.reason).toBe('QUOTA');
    // Freed when the grants' slot is 60 s + margin old (within a sub-slot of it): the hint rounds up.
    expect(no.retryAfterMs).toBeGreaterThan(60_000 + MARGIN_MS);
    expect(no.retryAfterMs).toBeLessThanOrEqual(60_000 + MARGIN_MS + 28);
    expect(no.retryAfterSeconds).toBe(61 + MARGIN_MS / 1000);
    expect(counter.writes()).toBe(1);
    await clock.advance(no.retryAfterMs);
    granted(await one.acquire({ tokenId: TOKEN, count: 50, limits }));
    expect(counter.writes()).toBe(2);
  });

  it('serves 20 concurrent acquires of one process with a single write', async () => {
    const one = ledger();
    const decisions = await Promise.all(
      Array.from({ length: 20 }, () => one.acquire({ tokenId: TOKEN, count: 3, limits })),
    );
    expect(decisions.filter((d) => d.granted)).toHaveLength(16);
    expect(decisions.filter((d) => !d.granted)).toHaveLength(4);
    expect(counter.writes()).toBe(1);
    expect((await one.remaining(TOKEN, limits))[0]).toEqual({ limit: 50, windowSeconds: 60, remaining: 2 });
  });

  it('I1: keeps several processes inside the limit: conflicting writes are retried on fresh state', async () => {
    const processes = Array.from({ length: 6 }, () => ledger());
    const decisions = await Promise.all(
      processes.flatMap((p) =>
        Array.from({ length: 5 }, () => p.acquire({ tokenId: TOKEN, count: 2, limits })),
      ),
    );
    const permits = decisions.reduce((sum, d) => sum + (d.granted ? d.count : 0), 0);
    // Demand was 60: exactly the 50 the minute allows were granted, none twice, whatever the interleaving.
    expect(permits).toBe(50);
    expect((await processes[0]?.remaining(TOKEN, limits))?.[0]?.remaining).toBe(0);
  });

  it('I6: lets grants of several processes in the same slot add up instead of conflicting, within the bound', async () => {
    const processes = [ledger(), ledger(), ledger()];
    // Each process grants once, one after the other, so each holds a fresh copy of the item (no read of its
    // own below, whose timing against the others' writes would decide whether it writes at all).
    for (const p of processes) granted(await p.acquire({ tokenId: TOKEN, count: 1, limits }));
    counter.reset();
    // Same moment, every copy saying there is room: 3 + 20 + 20 fit, the third 20 does not.
    const decisions = await Promise.all(
      processes.map((p) => p.acquire({ tokenId: TOKEN, count: 20, limits })),
    );
    expect(decisions.filter((d) => d.granted)).toHaveLength(2);
    expect(denied(decisions.find((d) => !d.granted) as PermitDecision).reason).toBe('QUOTA');
    expect((await processes[1]?.remaining(TOKEN, limits))?.[0]?.remaining).toBe(7);
    // Two head additions and the one that no longer fitted: no conflict between the two that did.
    expect(counter.calls.UpdateItemCommand).toBe(3);
  });

  it('I5: fails closed after too many conflicting writes', async () => {
    const a = ledger({ maxConflictRetries: 0 });
    const b = ledger();
    const grant = granted(await a.acquire({ tokenId: TOKEN, count: 2, limits }));
    // b rewrites the whole item (a give-back), so a's next write, built on what it cached, is refused.
    await b.giveBack({ tokenId: TOKEN, count: 1, receipt: grant.receipt, limits });
    const error = await a.acquire({ tokenId: TOKEN, count: 1, limits }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect(error).toMatchObject({ code: 'LEDGER_UNAVAILABLE' });
    granted(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
    granted(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect((await b.remaining(TOKEN, limits))[0]?.remaining).toBe(47);
  });

  it('spreads retry hints over at most 1 % of the shortest window, never earlier than the room', async () => {
    const spread = ledger({ random: () => 0.999 });
    granted(await spread.acquire({ tokenId: TOKEN, count: 50, limits }));
    const no = denied(await spread.acquire({ tokenId: TOKEN, count: 1, limits }));
    const exact = denied(await ledger().acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no.retryAfterMs - exact.retryAfterMs).toBe(599);
    await clock.advance(exact.retryAfterMs);
    granted(await ledger().acquire({ tokenId: TOKEN, count: 1, limits }));
  });

  it('I5: fails closed when DynamoDB cannot be reached or answers with an error: no permit', async () => {
    const port = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const telemetry = new MemoryTelemetry();
    const unreachable = createDynamoDbClient({ endpoint: `http://127.0.0.1:${port}` });
    const closed = new DynamoRateLedger({ client: unreachable, tableName: table, clock, telemetry });
    const attempts = [
      closed.acquire({ tokenId: TOKEN, count: 1, limits }),
      closed.giveBack({
        tokenId: TOKEN,
        count: 1,
        receipt: `r1.${TOKEN}..1.1.${callerTag('')}.0000000aaaa.x`,
        limits,
      }),
      closed.reportVendorFeedback({ tokenId: TOKEN, limits, retryAfterSeconds: 5 }),
    ];
    for (const attempt of attempts) await expect(attempt).rejects.toBeInstanceOf(LedgerUnavailableError);
    await expect(closed.remaining(TOKEN, limits)).rejects.toBeInstanceOf(LedgerUnavailableError);
    unreachable.destroy();
    expect(telemetry.logs.some((log) => log.level === 'warn' && log.attributes.tokenId === TOKEN)).toBe(true);
    const missingTable = new DynamoRateLedger({ client, tableName: 'no-such-table', clock });
    await expect(missingTable.acquire({ tokenId: TOKEN, count: 1, limits })).rejects.toMatchObject({
      code: 'LEDGER_UNAVAILABLE',
    });
  });

  it('gives back unused permits so another process can be granted them', async () => {
    const a = ledger();
    const b = ledger();
    const grant = granted(await a.acquire({ tokenId: TOKEN, count: 50, limits }));
    denied(await b.acquire({ tokenId: TOKEN, count: 10, limits }));
    await clock.advance(2000);
    await expect(a.giveBack({ tokenId: TOKEN, count: 10, receipt: grant.receipt, limits })).resolves.toEqual({
      returned: 10,
    });
    granted(await b.acquire({ tokenId: TOKEN, count: 10, limits }));
    denied(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    const writes = counter.writes();
    // A receipt is good once: giving back again changes nothing and writes nothing.
    await expect(
      a.giveBack({ tokenId: TOKEN, count: 5, receipt: grant.receipt, limits }),
    ).rejects.toMatchObject({
      code: 'RECEIPT_REJECTED',
      problem: 'SPENT',
    });
    expect(counter.writes()).toBe(writes);
  });

  it('a receipt expires with its own id, even if the configuration lengthens the give-back window later', async () => {
    const a = ledger();
    const three = rateLimitSettingsSchema.parse({ ...limits, marginSeconds: 5, permitValiditySeconds: 3 });
    const grant = granted(await a.acquire({ tokenId: TOKEN, count: 5, limits: three }));
    await a.giveBack({ tokenId: TOKEN, count: 1, receipt: grant.receipt, limits: three });
    // Validity 3 s: the receipt (and its spent id) lived 7 s. A deploy with 4 s permits would allow 9 s.
    await clock.advance(8000);
    const longer = rateLimitSettingsSchema.parse({ ...limits, marginSeconds: 5, permitValiditySeconds: 4 });
    await expect(
      a.giveBack({ tokenId: TOKEN, count: 4, receipt: grant.receipt, limits: longer }),
    ).rejects.toMatchObject({ problem: 'EXPIRED' });
  });

  it("turns a vendor 429's Retry-After into a cooldown every process obeys until it passes", async () => {
    const a = ledger();
    const b = ledger();
    granted(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    await a.reportVendorFeedback({ tokenId: TOKEN, limits, retryAfterSeconds: 30 });
    const no = denied(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no).toMatchObject({ reason: 'COOLDOWN', retryAfterSeconds: 30 });
    expect((await b.remaining(TOKEN, limits)).every((entry) => entry.remaining === 0)).toBe(true);
    await clock.advance(29_999);
    denied(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
    await clock.advance(1);
    granted(await b.acquire({ tokenId: TOKEN, count: 1, limits }));
  });

  it('lets X-RateLimit-Remaining/-Reset only tighten: a looser report writes nothing', async () => {
    const a = ledger();
    const reset = Math.floor(clock.now() / 1000) + 40;
    await a.reportVendorFeedback({ tokenId: TOKEN, limits, limit: 50, remaining: 5, reset });
    expect(counter.writes()).toBe(1);
    await a.reportVendorFeedback({ tokenId: TOKEN, limits, limit: 50, remaining: 20, reset });
    await a.reportVendorFeedback({ tokenId: TOKEN, limits, limit: 50, remaining: 49, reset });
    expect(counter.writes()).toBe(1);
    granted(await a.acquire({ tokenId: TOKEN, count: 5, limits }));
    const no = denied(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no.reason).toBe('VENDOR_CAP');
    expect(no.retryAfterMs).toBe(reset * 1000 - clock.now());
    await clock.advance(no.retryAfterMs);
    granted(await a.acquire({ tokenId: TOKEN, count: 40, limits }));
  });

  it('applies class limits on top of the general ones', async () => {
    const a = ledger();
    granted(await a.acquire({ tokenId: TOKEN, count: 10, class: 'reports', limits }));
    expect(denied(await a.acquire({ tokenId: TOKEN, count: 1, class: 'reports', limits })).reason).toBe(
      'QUOTA',
    );
    granted(await a.acquire({ tokenId: TOKEN, count: 40, limits }));
    denied(await a.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(await a.remaining(TOKEN, limits)).toEqual([
      { limit: 50, windowSeconds: 60, remaining: 0 },
      { limit: 1000, windowSeconds: 3600, remaining: 950 },
      { limit: 10, windowSeconds: 60, remaining: 0, class: 'reports' },
    ]);
    await expect(a.acquire({ tokenId: TOKEN, count: 1, class: 'nope', limits })).rejects.toMatchObject({
      code: 'UNKNOWN_PERMIT_CLASS',
    });
  });

  it('sets the TTL attribute and ignores an item whose purge time has passed (TTL deletes lazily)', async () => {
    const a = ledger();
    const grant = granted(await a.acquire({ tokenId: TOKEN, count: 50, limits }));
    const stored = await item();
    // Last grant + the longest span (3600 s + margin) + one of its slots (60 s) + an hour of slack.
    expect(Number(stored?.purgeAt?.N)).toBe(
      Math.ceil((grant.grantedAt + 3_660_000 + MARGIN_MS) / 1000) + 3600,
    );
    clock.set(Number(stored?.purgeAt?.N) * 1000);
    const b = ledger();
    expect((await b.remaining(TOKEN, limits))[0]?.remaining).toBe(50);
    granted(await b.acquire({ tokenId: TOKEN, count: 50, limits }));
    expect(Number((await item())?.v?.N)).toBe(2);
  });

  it('refuses bad input before touching DynamoDB; remaining() only reads', async () => {
    const a = ledger();
    await expect(a.acquire({ tokenId: TOKEN, count: 51, limits })).rejects.toMatchObject({
      code: 'INVALID_PERMIT_COUNT',
    });
    await expect(a.acquire({ tokenId: 'not a token id!', count: 1, limits })).rejects.toMatchObject({
      code: 'INVALID_LEDGER_REQUEST',
    });
    await expect(
      a.giveBack({ tokenId: TOKEN, count: 1, receipt: 'r1.forged', limits }),
    ).rejects.toMatchObject({
      code: 'RECEIPT_REJECTED',
      problem: 'MALFORMED',
    });
    expect(Object.keys(counter.calls)).toEqual([]);
    await a.remaining(TOKEN, limits);
    expect(counter.writes()).toBe(0);
    expect(await item()).toBeUndefined();
  });

  it('I3: keeps the item within its computed bound and 1 KB (1 WCU) at the class bound, filled as full as it gets', async () => {
    const { largest, bound } = await fillLedgerItem({ client, tableName: table, limits, hours: 1.1 });
    console.info(`ledger item at the class bound, filled: ${largest} bytes (bound ${bound})`);
    expect(largest).toBeGreaterThan(0.75 * bound);
    expect(largest).toBeLessThanOrEqual(bound);
    expect(bound).toBeLessThanOrEqual(1024);
  }, 180_000);

  // Thousands of simulated writes measure our item's size, which the engine does not change: on one engine.
  if (engine === 'dynalite')
    it('keeps the item within its computed bound and 1 KB (1 WCU) at the class bound, under adversarial use', async () => {
      const a = ledger();
      let largest = 0;
      const tight = rateLimitSettingsSchema.parse({ ...limits, marginSeconds: 5 });
      // A permit every 4 s, every third in a class: every slot of the hour rings in use, kept under the
      // hour's 1000 so that the sweeps below are granted.
      for (let step = 0; step < ADVERSARIAL_STEPS; step++) {
        await clock.advance(4000 + (step % 7));
        const cls = step % 3 === 0 ? 'reports' : undefined;
        const decision = await a.acquire({ tokenId: TOKEN, count: 1, class: cls, limits: tight });
        // Spent receipts fill the item's set of them (SPENT_LIMIT at most).
        if (decision.granted && step % 5 === 0)
          await a.giveBack({ tokenId: TOKEN, count: 1, receipt: decision.receipt, limits: tight });
        if (step % 600 === 599) {
          // After a quiet minute, grants in all 36 sub-slots of one second from two processes: the minute rings'
          // head slots collect 36 sub-slots each while the hour rings still hold their older slots.
          await clock.advance(66_000);
          const other = ledger();
          const second = Math.ceil(clock.now() / 1000) * 1000;
          let sweep = 0;
          for (let sub = 0; sub < 36; sub++) {
            clock.set(second + Math.ceil((sub * 1000) / 36));
            const cls = sub % 4 === 0 ? 'reports' : undefined;
            const decision = await (sub % 2 ? a : other).acquire({
              tokenId: TOKEN,
              count: 1,
              class: cls,
              limits: tight,
            });
            if (decision.granted) sweep++;
          }
          expect(sweep).toBe(36);
          largest = Math.max(largest, dynamoItemSize((await item()) ?? {}));
        }
        if (step % 300 === 0) {
          for (let c = 0; c < 7; c++)
            await a.reportVendorFeedback({
              tokenId: TOKEN,
              limits: tight,
              limit: c % 2 ? 50 : 10,
              remaining: 0,
              reset: Math.floor(clock.now() / 1000) + 30 + c,
            });
          await a.reportVendorFeedback({ tokenId: TOKEN, limits: tight, retryAfterSeconds: 1 });
        }
        if (step % 50 === 0) largest = Math.max(largest, dynamoItemSize((await item()) ?? {}));
      }
      largest = Math.max(largest, dynamoItemSize((await item()) ?? {}));
      const bound = planFor(tight).itemBytesBound;
      // Use, not a fill: about half the bound, as before (500 of 1016 B in format 1; format 2 is packed).
      expect(largest).toBeGreaterThan(0.5 * bound);
      expect(largest).toBeLessThanOrEqual(bound);
      expect(bound).toBeLessThanOrEqual(1024);
      console.info(`largest ledger item: ${largest} bytes (bound ${bound})`);
      // Thousands of writes: a generous limit, so that a loaded machine cannot fail it.
    }, 180_000);
});
