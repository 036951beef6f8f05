import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { LearnedStore } from '../shared/ledger/learned-store.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { previousReleaseModule } from './support/previous-release.js';
import { CLASS, HOME, PEER } from './support/regions-learned-world.js';

/**
 * The first learning in two Regions (docs/multi-region.md): the report seeds the learned ring in the ledger of the
 * Region that took it (seedLearnedRing); the other Region's ledger, deciding on the learned view for the first time,
 * seeds its own from the count the report kept on the learned item (the MRSC table, `sd`: ledger-state.ts
 * seedFromLearned). Before, it started that ring with nothing in it, and took the whole learned limit on top of the
 * requests the vendor had counted: where the reporting Region's lease record did not yet name the learned ring
 * (here: the reporting Region asks for nothing more, as when it has no demand), the vendor refused them.
 *
 * The vendor: 10 per 60 s, one window from the first request (the sandbox's fixed window). The peer probes at 0 and
 * 14 s, home at 1 and 15 s; home's answer at 15 s says "10, 6 left" and home reports it. From 21 s (its cache read
 * again) the peer asks every second up to 59 s: the vendor has room for 6. Before (bb274fe) the peer took 10: 4
 * refused. Now it takes 5 (its probe grant at 14 s, in flight at the report, is counted twice for the window: one
 * request of use, once).
 */
const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const VENDOR = { limit: 10, windowMs: 60_000 };
const SET = 'uat-advisor';
const TOKEN = '5c4b3a2918070605';
const limits = rateLimitSettingsSchema.parse({ classes: { [CLASS]: [] } });
/** The release before this one on a two-Region stage's learned items (ledger-region-share-releases.test.ts). */
const RELEASE_N1 = 'a6dc151788fce1df21d7b674e85ed3f6c227623d';

describe.each(ENGINES)('the first learning seeds the other Region on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  it('the other Region takes no more than the vendor has room for after the report (before: 4 refused)', async () => {
    const clock = new ManualClock(T0);
    const learnedTable = await dynamo.createTable('global');
    const ledgers: Record<string, DynamoRateLedger> = {};
    for (const region of [HOME, PEER])
      ledgers[region] = new DynamoRateLedger({
        client,
        tableName: await dynamo.createTable(`ledger-${region}`),
        clock,
        // Not regional: what is under test is the ring the learned item seeds (a regional ledger grants nothing
        // before a lease; the lease is what holds the reporting Region, here idle after its report).
        learnedTableName: learnedTable,
      });
    const at = (seconds: number) => clock.set(T0 + seconds * 1000);
    const sent: number[] = [];
    const ask = async (region: string): Promise<boolean> => {
      const decision = await (ledgers[region] as DynamoRateLedger).acquire({
        tokenId: TOKEN,
        count: 1,
        class: CLASS,
        limits,
        setId: SET,
      });
      if (decision.granted) sent.push(clock.now());
      return decision.granted;
    };
    // Under the probe (1 per 10 s and the margin in each ledger): the vendor counts each.
    for (const [seconds, region] of [
      [0, PEER],
      [1, HOME],
      [14, PEER],
      [15, HOME],
    ] as const) {
      at(seconds);
      expect(await ask(region), `${region} at ${seconds} s`).toBe(true);
    }
    // Home's answer at 15 s: "10, 6 left, reset at 60 s", reported by home.
    const counted = sent.length;
    await (ledgers[HOME] as DynamoRateLedger).reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'arn:aws:iam::123456789012:role/report-service',
      limits,
      setId: SET,
      class: CLASS,
      limit: VENDOR.limit,
      remaining: VENDOR.limit - counted,
      reset: Math.floor(T0 / 1000) + 60,
    });
    const learned = (await (ledgers[PEER] as DynamoRateLedger).learned(SET))[CLASS] ?? [];
    expect(learned.map((l) => [l.limit, l.windowSeconds])).toEqual([[10, 60]]);
    // The peer, its cached view read again (5 s), asks every second to the end of the vendor's window.
    let peerAfter = 0;
    for (let seconds = 21; seconds < 60; seconds++) {
      at(seconds);
      if (await ask(PEER)) peerAfter++;
    }
    const inWindow = sent.filter((t) => t < T0 + VENDOR.windowMs).length;
    const refused = Math.max(0, inWindow - VENDOR.limit);
    const figures = JSON.stringify({ engine, counted, peerAfter, refused });
    if (process.env.CASE_FIGURES) console.log(`first learning seeds the other Region: ${figures}`);
    expect(refused, figures).toBe(0);
    // Not vacuous: the peer served from the learned ring, all the room but the one grant counted twice.
    expect(peerAfter, figures).toBe(VENDOR.limit - counted - 1);
  }, 60_000);

  it('release N-1 (a6dc151) reads the learned item with its seed (`sd`: an attribute it ignores), and its write drops the seed only', async () => {
    const clock = new ManualClock(T0);
    const table = await dynamo.createTable('global');
    const current = new LearnedStore({ client, tableName: table, clock });
    // a6dc151's store: `update` changes the classes alone (no rises, no seeds).
    const { LearnedStore: Previous } = await previousReleaseModule<{
      LearnedStore: new (
        options: ConstructorParameters<typeof LearnedStore>[0],
      ) => {
        view(setId: string, fresh?: boolean): Promise<{ version: number; classes: unknown }>;
        update(
          setId: string,
          change: (classes: Record<string, unknown[]>) => Record<string, unknown[]> | undefined,
        ): Promise<{ changed: boolean }>;
      };
    }>('shared/ledger/learned-store.ts', RELEASE_N1);
    const previous = new Previous({ client, tableName: table, clock });
    const limit = { limit: 10, windowSeconds: 60, learnedAt: T0, by: 'a1b2c3d4' };
    await current.update(SET, (learned, version) => ({
      classes: { [CLASS]: [limit] },
      rises: learned.rises,
      seeds: { [CLASS]: [{ w: 60, n: 4, at: T0, v: version }] },
    }));
    const written = await current.view(SET, true);
    expect(written.seeds).toEqual({ [CLASS]: [{ w: 60, n: 4, at: T0, v: 1 }] });
    // N-1 reads the limits as written, and its write (conditional on the version) applies over it.
    const read = await previous.view(SET, true);
    expect(read.version).toBe(1);
    expect(read.classes).toEqual({ [CLASS]: [limit] });
    const other = { limit: 3, windowSeconds: 10, learnedAt: T0, by: 'e5f6a7b8' };
    const { changed } = await previous.update(SET, (classes) => ({ ...classes, other: [other] }));
    expect(changed).toBe(true);
    // This release reads N-1's write: the limits, no seed (a ring first held after it starts as before the seed).
    const after = await current.view(SET, true);
    expect(after.version).toBe(2);
    expect(after.classes).toEqual({ [CLASS]: [limit], other: [other] });
    expect(after.seeds).toEqual({});
  });
});
