import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import {
  type AdoptShareResult,
  InvalidLedgerRequestError,
  LedgerUnavailableError,
  RegionalRateLedger,
  type RegionShare,
  SHARE_RETRY_MS,
} from '../shared/ledger/index.js';
import { ledgerKey } from '../shared/ledger/item/index.js';
import { GENERAL_SCOPE, ringKey } from '../shared/ledger/limit-plan.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import { countDynamoCalls, denied, granted } from './support/ledger-harness.js';
import { enginesTakingTurns } from './support/property-runs.js';

/**
 * A Region's share in its regional ledger (issue 27, shared/ledger/region-share.ts): adopted with one conditional
 * write, idempotent under lost answers and concurrent grants; every grant held to min(configured, share) per ring
 * and to the floor after the fence, on the same one write per grant as without a share.
 */
const limits = rateLimitSettingsSchema.parse({ classes: { reports: [{ limit: 10, windowSeconds: 60 }] } });
const reserved = rateLimitSettingsSchema.parse({
  reservations: [{ consumer: 'trading', perWindow: { '60': 10, '3600': 200 } }],
});
const TOKEN = '1a2b3c4d5e6f7081';
const MINUTE = ringKey(GENERAL_SCOPE, 60_000);
const HOUR = ringKey(GENERAL_SCOPE, 3_600_000);
const CLASS = ringKey('reports', 60_000);

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on DynamoDB Local,
// test:long on dynalite (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 1);

describe.each(IN_TURN)('a Region share in the rate ledger on %s', (engine) => {
  let dynamo: LocalDynamo;
  let faulty: FaultyDynamoDb;
  let clock: ManualClock;
  let table: string;
  const ledger = (options: { regional?: boolean; client?: DynamoDBClient } = {}) =>
    new RegionalRateLedger({
      client: options.client ?? faulty.client,
      tableName: table,
      clock,
      random: () => 0,
      ...(options.regional ? { regional: true } : {}),
    });
  const share = (minute: number, extra: Partial<RegionShare> = {}): RegionShare => ({
    limits: { [MINUTE]: minute, [HOUR]: 20 * minute, [CLASS]: 5 },
    fenceAt: clock.now() + 30_000,
    ...extra,
  });
  const item = async () =>
    (
      await faulty.client.send(
        new GetItemCommand({ TableName: table, Key: ledgerKey(TOKEN), ConsistentRead: true }),
      )
    ).Item;
  /** Grants `count` at a time until denied; returns how many were granted. */
  const fill = async (
    l: RegionalRateLedger,
    ask: { count?: number; consumer?: string; class?: string } = {},
    settings = limits,
  ) => {
    let total = 0;
    for (;;) {
      const decision = await l.acquire({ tokenId: TOKEN, count: ask.count ?? 1, limits: settings, ...ask });
      if (!decision.granted) return { total, denial: decision };
      total += decision.count;
    }
  };

  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    faulty?.client.destroy();
    await dynamo.close();
  });
  beforeEach(async () => {
    faulty?.client.destroy();
    faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
    table = await dynamo.createTable('ledger-region-share');
  });

  it('holds each ring to min(configured, share): 20 of the minute, then QUOTA until the grants leave the span', async () => {
    const l = ledger();
    expect((await l.adoptShare(TOKEN, limits, undefined, share(20))).outcome).toBe('adopted');
    // The class's share is 5, below its configured 10; its grants count in the general rings too.
    expect((await fill(l, { class: 'reports' })).total).toBe(5);
    const { total, denial } = await fill(l);
    expect(total).toBe(15);
    expect(denial.reason).toBe('QUOTA');
    // The minute's grants leave its span (window plus margin): a finite wait, not the share's retry.
    expect(denial.retryAfterMs).toBeGreaterThan(60_000);
    expect(denial.retryAfterMs).toBeLessThanOrEqual(64_000);
    expect(denial.remaining[0]).toMatchObject({ limit: 20, remaining: 0 });
  });

  it('from fenceAt on grants only the floor (0 by default), denied QUOTA with the share retry', async () => {
    const l = ledger({ regional: true });
    await l.adoptShare(TOKEN, limits, undefined, share(20));
    granted(await l.acquire({ tokenId: TOKEN, count: 3, limits }));
    await clock.advance(30_000);
    const no = denied(await l.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no.reason).toBe('QUOTA');
    expect(no.retryAfterMs).toBe(SHARE_RETRY_MS);
    expect(no.retryAfterSeconds).toBe(SHARE_RETRY_MS / 1000);
    // A renewal moves the fence; with a floor of 5 a minute, 5 are granted after it (once the span allows).
    await l.adoptShare(TOKEN, limits, undefined, share(20, { floor: { [MINUTE]: 5, [HOUR]: 100 } }));
    granted(await l.acquire({ tokenId: TOKEN, count: 10, limits }));
    await clock.advance(30_000);
    // 13 in the minute's span already: over the floor of 5, so nothing until a renewal.
    expect(denied(await l.acquire({ tokenId: TOKEN, count: 1, limits })).reason).toBe('QUOTA');
    await clock.advance(64_000);
    expect((await fill(l)).total).toBe(5);
  });

  it('one Region again: a ledger without `regional` holds a share until its fence, then grants the configured limits and removes it', async () => {
    // A version beside a regional one (a canary, a stage gaining a peer): the live share holds it too.
    const alone = ledger();
    await alone.adoptShare(TOKEN, limits, undefined, share(20));
    expect((await fill(alone)).total).toBe(20);
    // The renewer is gone (the stage went back to one Region) and the lease lapsed: the whole budget again, and
    // the item's next write (a full one) takes the share out, for release N-1, which would hold it to its floor.
    await clock.advance(30_000);
    expect((await item())?.rs).toBeDefined();
    // The minute's configured 50, less the 20 granted under the share, still in its span.
    expect((await fill(alone)).total).toBe(30);
    expect((await item())?.rs).toBeUndefined();
    // What it granted stays counted: the minute is full for a ledger of either kind, and a regional one reading
    // the item (no share now) grants only its floor, as before its first lease.
    expect(denied(await ledger().acquire({ tokenId: TOKEN, count: 1, limits })).reason).toBe('QUOTA');
    expect(
      denied(await ledger({ regional: true }).acquire({ tokenId: TOKEN, count: 1, limits })),
    ).toMatchObject({
      reason: 'QUOTA',
      retryAfterMs: SHARE_RETRY_MS,
    });
  });

  it('holds a ring the share does not name to its floor', async () => {
    const l = ledger();
    await l.adoptShare(TOKEN, limits, undefined, {
      limits: { [MINUTE]: 20, [HOUR]: 400 },
      fenceAt: clock.now() + 30_000,
    });
    granted(await l.acquire({ tokenId: TOKEN, count: 1, limits }));
    const no = denied(await l.acquire({ tokenId: TOKEN, count: 1, limits, class: 'reports' }));
    expect(no.reason).toBe('QUOTA');
    expect(no.retryAfterMs).toBe(SHARE_RETRY_MS);
  });

  it('a regional ledger grants nothing before its first share, then what the share says', async () => {
    const l = ledger({ regional: true });
    const no = denied(await l.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no).toMatchObject({ reason: 'QUOTA', retryAfterMs: SHARE_RETRY_MS });
    // Without `regional`, the same item (no share) is as it always was.
    granted(await ledger().acquire({ tokenId: TOKEN, count: 1, limits }));
    await l.adoptShare(TOKEN, limits, undefined, share(10));
    expect((await fill(l)).total).toBe(9);
  });

  it('reservations: a consumer homed here keeps its reservation within the share; one homed elsewhere has only the shared part', async () => {
    const l = ledger();
    await l.adoptShare(TOKEN, reserved, undefined, {
      limits: { [MINUTE]: 25, [HOUR]: 500 },
      fenceAt: clock.now() + 30_000,
      home: ['trading'],
    });
    // The others: the share less trading's reservation.
    expect((await fill(l, {}, reserved)).total).toBe(15);
    // Trading still gets its 10: the share holds them.
    expect((await fill(l, { consumer: 'trading' }, reserved)).total).toBe(10);
    const usage = await l.usage(TOKEN, reserved);
    expect(usage.windows[0]).toMatchObject({ used: 25, remaining: 0 });

    // A minute and a bit later, trading homed in the other Region: no reservation here, the shared part only.
    await clock.advance(65_000);
    await l.adoptShare(TOKEN, reserved, undefined, {
      limits: { [MINUTE]: 25, [HOUR]: 500 },
      fenceAt: clock.now() + 30_000,
    });
    expect((await fill(l, { consumer: 'trading' }, reserved)).total).toBe(25);
    expect((await fill(l, {}, reserved)).total).toBe(0);
  });

  it('a lower share holds new grants until those made under the higher one leave the span', async () => {
    const l = ledger();
    await l.adoptShare(TOKEN, limits, undefined, share(40));
    granted(await l.acquire({ tokenId: TOKEN, count: 30, limits }));
    await clock.advance(1000);
    expect((await l.adoptShare(TOKEN, limits, undefined, share(20))).outcome).toBe('adopted');
    const no = denied(await l.acquire({ tokenId: TOKEN, count: 1, limits }));
    expect(no.reason).toBe('QUOTA');
    expect((await l.usage(TOKEN, limits)).windows[0]).toMatchObject({ used: 30, remaining: 0 });
    await clock.advance(no.retryAfterMs);
    await l.adoptShare(TOKEN, limits, undefined, share(20));
    expect((await fill(l)).total).toBe(20);
  });

  it('a grant decided on a cached item under the old share is decided again once a lower share is adopted', async () => {
    // Two processes of one Region: `a` has the item cached from its own grant, `b` lowers the share.
    const a = ledger();
    const b = ledger();
    await a.adoptShare(TOKEN, limits, undefined, share(20));
    granted(await a.acquire({ tokenId: TOKEN, count: 10, limits }));
    await b.adoptShare(TOKEN, limits, undefined, share(10));
    faulty.faults.resetStats();
    // Within a's cache freshness: it builds its grant on the item as it wrote it, which fails its condition.
    expect(denied(await a.acquire({ tokenId: TOKEN, count: 5, limits })).reason).toBe('QUOTA');
    expect(faulty.faults.stats.byCommand.UpdateItem?.sent).toBe(1);
    expect((await a.usage(TOKEN, limits)).windows[0]).toMatchObject({ used: 10 });
  });

  it('a grant added to the head slot on a cached item is bounded by the share in its condition, not the configured limit', async () => {
    const a = ledger();
    const b = ledger();
    await a.adoptShare(TOKEN, limits, undefined, share(10));
    granted(await a.acquire({ tokenId: TOKEN, count: 4, limits }));
    // b's 4 go to the same head slot: a's cached item does not know them.
    granted(await b.acquire({ tokenId: TOKEN, count: 4, limits }));
    faulty.faults.resetStats();
    expect(denied(await a.acquire({ tokenId: TOKEN, count: 4, limits })).reason).toBe('QUOTA');
    // a did write (its head addition), and the condition refused it.
    expect(faulty.faults.stats.byCommand.UpdateItem?.sent).toBe(1);
    expect((await a.usage(TOKEN, limits)).windows[0]).toMatchObject({ used: 8, remaining: 2 });
  });

  it('adopts once when the answer is lost, and again changes nothing; an earlier lease is not adopted', async () => {
    const l = ledger();
    granted(await l.acquire({ tokenId: TOKEN, count: 2, limits }));
    const version = Number((await item())?.v?.N);
    faulty.faults.set({ commands: ['UpdateItem'] });
    faulty.faults.script('lostAnswer', 'none');
    const wanted = share(20);
    expect(await ledger().adoptShare(TOKEN, limits, undefined, wanted)).toMatchObject({
      outcome: 'adopted',
      share: wanted,
    });
    expect(faulty.faults.stats.lostAnswer).toBe(1);
    // Applied once: one version more, the share in the item, the grants before it still counted.
    const after = await item();
    expect(Number(after?.v?.N)).toBe(version + 1);
    expect(after?.rs?.S).toBeDefined();
    faulty.faults.off();
    faulty.faults.resetStats();
    expect((await ledger().adoptShare(TOKEN, limits, undefined, wanted)).outcome).toBe('unchanged');
    expect(faulty.faults.stats.byCommand.UpdateItem).toBeUndefined();
    const earlier = { ...share(5), fenceAt: wanted.fenceAt - 1 };
    expect(await ledger().adoptShare(TOKEN, limits, undefined, earlier)).toMatchObject({
      outcome: 'stale',
      share: wanted,
    });
    expect(await item()).toEqual(after);
    expect((await fill(ledger())).total).toBe(18);
  });

  it('versions (issue 33): a cap lowers and stamps in one write, a replace of an older version is refused, `rs` stays as N-1 reads it', async () => {
    const l = ledger({ regional: true });
    const held = share(20, { version: 4 });
    await l.adoptShare(TOKEN, limits, undefined, held);
    granted(await l.acquire({ tokenId: TOKEN, count: 3, limits }));
    const before = await item();
    expect(before?.rsv?.S).toBe(`4;${held.fenceAt.toString(36)}`);
    // A renewal that read version 5 caps at its plan, stamped 6, before writing; its answer is lost once.
    faulty.faults.set({ commands: ['UpdateItem'] });
    faulty.faults.script('lostAnswer', 'none');
    const capped = await l.adoptShare(
      TOKEN,
      limits,
      undefined,
      { limits: { [MINUTE]: 8, [HOUR]: 900, [CLASS]: 9 }, fenceAt: held.fenceAt + 10_000, version: 6 },
      { mode: 'cap' },
    );
    faulty.faults.off();
    // Lowered where the plan is lower, kept where it is not, the fence kept: one write, applied once.
    expect(capped.share).toEqual({ ...held, limits: { [MINUTE]: 8, [HOUR]: 400, [CLASS]: 5 }, version: 6 });
    expect(capped.outcome).toBe('adopted');
    expect(capped.snapshot.rings[MINUTE]?.slots.reduce((n, slot) => n + slot.count, 0)).toBe(3);
    const after = await item();
    expect(Number(after?.v?.N)).toBe(Number(before?.v?.N) + 1);
    expect(after?.rsv?.S).toBe(`6;${held.fenceAt.toString(36)}`);
    // `rs` is the text of old: the version is not in it (release a6dc151 decodes it with a strict pattern).
    expect(after?.rs?.S).toMatch(/^[0-9a-z]+;[^;]*$/);
    // A slow run's adoption of version 5: refused, whatever its fence; version 6's own: adopted.
    const slow = share(22, { fenceAt: held.fenceAt + 9_000, version: 5 });
    expect((await l.adoptShare(TOKEN, limits, undefined, slow)).outcome).toBe('stale');
    expect((await fill(l)).total).toBe(5);
    const newer = share(8, { fenceAt: held.fenceAt + 10_000, version: 6 });
    expect(await l.adoptShare(TOKEN, limits, undefined, newer)).toMatchObject({
      outcome: 'adopted',
      share: newer,
    });
    expect((await item())?.rsv?.S).toBe(`6;${newer.fenceAt.toString(36)}`);
  });

  it('adopts under concurrent grants of other processes and lost answers: asks after it are held to it', async () => {
    const noisy = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed: 7, lostAnswer: 0.1 });
    try {
      const processes = [0, 1, 2].map(() => ledger({ client: noisy.client }));
      await processes[0]?.adoptShare(TOKEN, limits, undefined, share(50));
      // Each process asks one at a time (30 in all: every one fits the share of 50); once 4 were granted, the
      // first process lowers the share to 12 and asks on after it, the others never stop asking.
      let grants = 0;
      let grantedBefore = 0;
      let askedAfter = 0;
      let unavailable = 0;
      let adopted: AdoptShareResult | undefined;
      const asking = processes.map(async (p, index) => {
        for (let i = 0; i < 10; i++) {
          if (index === 0 && grants >= 4 && adopted === undefined)
            adopted = await ledger({ client: noisy.client }).adoptShare(TOKEN, limits, undefined, share(12));
          const after = adopted !== undefined;
          if (after) askedAfter++;
          try {
            const decision = await p.acquire({ tokenId: TOKEN, count: 1, limits });
            if (decision.granted) grants++;
            if (decision.granted && !after) grantedBefore++;
          } catch (error) {
            // Fails closed where a lost answer hides a lost condition (the ledger's rule): no grant.
            if (!(error instanceof LedgerUnavailableError)) throw error;
            unavailable++;
          }
        }
      });
      await Promise.all(asking);
      expect(adopted?.outcome).toBe('adopted');
      expect(noisy.faults.stats.lostAnswer).toBeGreaterThan(0);
      expect(askedAfter).toBeGreaterThan(0);
      expect(unavailable).toBeLessThan(5);
      // Asks that began after the adoption were decided on it: 12 at most in all, beside those from before.
      expect(grants).toBeLessThanOrEqual(Math.max(12, grantedBefore));
      // Every grant counted once, whatever was lost; none more until the span is over once 12 are reached.
      const { used } = (await ledger().usage(TOKEN, limits)).windows[0] as { used: number };
      expect(used).toBe(grants);
      const { total } = await fill(ledger());
      expect(used + total).toBe(Math.max(used, 12));
    } finally {
      noisy.client.destroy();
    }
  });

  it('refuses a share that is not one, writing nothing', async () => {
    const l = ledger();
    const bad: unknown[] = [
      { limits: { [MINUTE]: 20 }, fenceAt: -1 },
      { limits: { [MINUTE]: 1.5 }, fenceAt: 1 },
      { limits: { [ringKey('other', 60_000)]: 3 }, fenceAt: 1 },
      { limits: { [MINUTE]: 3 }, fenceAt: 1, home: ['nobody'] },
      { limits: { [MINUTE]: 3 }, fenceAt: 1, until: 5 },
      { limits: { [MINUTE]: 3 }, fenceAt: 1, version: -1 },
      { limits: [], fenceAt: 1 },
      null,
    ];
    for (const share of bad)
      await expect(l.adoptShare(TOKEN, limits, undefined, share as RegionShare)).rejects.toBeInstanceOf(
        InvalidLedgerRequestError,
      );
    expect(faulty.faults.stats.sent).toBe(0);
    expect(await item()).toBeUndefined();
  });

  it('a grant under a share is one UpdateItem and no read, as without one', async () => {
    const counted = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    const calls = countDynamoCalls(counted.client);
    try {
      const perGrant = async (tokenId: string, withShare: boolean) => {
        const l = ledger({ client: counted.client });
        if (withShare) await l.adoptShare(tokenId, limits, undefined, share(40));
        granted(await l.acquire({ tokenId, count: 1, limits }));
        calls.reset();
        for (let i = 0; i < 5; i++) {
          await clock.advance(100);
          granted(await l.acquire({ tokenId, count: 1, limits }));
        }
        return { ...calls.calls };
      };
      const plain = await perGrant('aaaaaaaaaaaaaaa1', false);
      const shared = await perGrant('aaaaaaaaaaaaaaa2', true);
      expect(plain).toEqual({ UpdateItemCommand: 5 });
      expect(shared).toEqual(plain);
    } finally {
      counted.client.destroy();
    }
  });

  it('snapshot: a plain read of what each ring granted, slot by slot with the slot times', async () => {
    const l = ledger();
    await l.adoptShare(TOKEN, limits, undefined, share(40));
    const start = clock.now();
    granted(await l.acquire({ tokenId: TOKEN, count: 3, limits }));
    await clock.advance(2500);
    granted(await l.acquire({ tokenId: TOKEN, count: 2, limits, class: 'reports' }));
    faulty.faults.resetStats();
    const snapshot = (await l.regionView(TOKEN, limits)).snapshot;
    expect(faulty.faults.stats.byCommand).toEqual({
      GetItem: { sent: 1, lostAnswer: 0, throttle: 0, serverError: 0 },
    });
    expect(snapshot.at).toBe(start + 2500);
    expect(snapshot.rings[MINUTE]).toEqual({
      windowMs: 60_000,
      slotMs: 1000,
      slots: [
        { start: start + 2000, count: 2 },
        { start, count: 3 },
      ],
    });
    expect(snapshot.rings[HOUR]?.slots).toEqual([{ start, count: 5 }]);
    expect(snapshot.rings[CLASS]).toEqual({
      windowMs: 60_000,
      slotMs: 1000,
      slots: [{ start: start + 2000, count: 2 }],
    });
  });
});
