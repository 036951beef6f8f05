import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import { type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../shared/ledger/index.js';
import { MemoryTelemetry } from '../shared/observability.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { type Attempt, createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import { maxInAnySpan } from './support/ledger-harness.js';
import { itTakingTurns, propertyRuns } from './support/property-runs.js';
import { CLASS, HOME, PEER, RegionsLearnedWorld } from './support/regions-learned-world.js';

/**
 * Issue 33, Build 3: learned class limits shared between Regions (docs/multi-region.md, "Learned limits"). In a
 * two-Region stage the learned items live on the MRSC table beside the token and lease items, so what one Region
 * learns, the other holds and leases: both serve a learned class, and the probe is one budget for both. What
 * landed (a6dc151) kept them in each Region's ledger table: the Region that did not win the probe stayed on it
 * while the other leased the learned ring, and its share stayed 0 (the issue: 91 class permits in one Region, 0 in
 * the other over 10 minutes of equal demand; these callers: 96 and 0). Each case's name gives what a6dc151 did,
 * run there with this file and its harness (its ledger has no `learnedTableName`, so each Region keeps its own; the
 * only change its API forces: reports without the token's vendor clock offset).
 */
const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const MINUTE = 60_000;
/** The vendor's hidden class: 10 per 60 s (the sandbox's own general limits beside it). */
const FAMILY = [{ limit: 10, windowSeconds: 60 }];
/** The probe's ring: 1 per 10 s, plus the set's margin (3 s): at most one grant in any span of it. */
const PROBE_SPAN_MS = 13_000;
/** The SDK's attempts of one write (createFaultyDynamoDbClient's default maxAttempts): each meets the conflict. */
const CONFLICTS = ['replicatedWriteConflict', 'replicatedWriteConflict', 'replicatedWriteConflict'] as const;
/**
 * The control's simulated minutes: `npm test` runs the first 2 of test:long's 10 (the same world, so the same run
 * up to its end). The peer's share of the class stays 0 from the home Region's first learning on (the first minute).
 */
const CONTROL_MINUTES = propertyRuns({ quick: 2, full: 10 });
/**
 * The simulated minutes of the two cases of equal demand: `npm test` runs the first 2 of test:long's 10 (the same
 * world, so the same run up to its end). Both serve at a steady rate from the first minute on (measured per minute:
 * 4 and 4 a minute paced, about 8 and 2 greedy), so each count asserted is per minute of the run: test:long's are
 * the figures docs/multi-region.md quotes (10 minutes: 36 of 40 each, 80 in all), and a6dc151's figures in the
 * names are its 10 minutes'.
 */
const DEMAND_MINUTES = propertyRuns({ quick: 2, full: 10 });

/** A figure line, printed with CASE_FIGURES=1, and the message of the assertions it explains. */
function shown(name: string, figures: Record<string, unknown>): string {
  const text = `${name}: ${JSON.stringify(figures)}`;
  if (process.env.CASE_FIGURES) console.log(text);
  return text;
}

describe.each(ENGINES)('learned limits shared between two Regions on %s', (engine) => {
  const it = itTakingTurns(engine, ENGINES, {
    'a probe is shared': 0,
    'equal class demand': 1,
    'equal greedy class demand': 0,
    'the control': 1,
  });
  let dynamo: LocalDynamo;
  const open: { close(): unknown }[] = [];
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterEach(async () => {
    for (const part of open.splice(0)) await part.close();
  });
  afterAll(async () => {
    await dynamo.close();
  });

  async function worldOf(shared: boolean): Promise<RegionsLearnedWorld> {
    const clock = new ManualClock(T0);
    const sandbox: Sandbox = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      recordRequests: true,
      windowKind: 'fixed',
      families: [{ name: CLASS, pathPrefix: `/${CLASS}/`, limits: FAMILY }],
      tokenLifetimeSeconds: 4 * 3600,
    });
    open.push(sandbox);
    const world = new RegionsLearnedWorld({ dynamo, clock, sandbox, shared });
    open.push(world);
    await world.start();
    return world;
  }

  it("a learning write that meets the other Region's in flight (MRSC) reads again and decides again: both callers count, no error (a6dc151: LedgerUnavailableError)", async () => {
    const clock = new ManualClock(T0);
    const learnedTable = await dynamo.createTable('global');
    const limits = rateLimitSettingsSchema.parse({ classes: { [CLASS]: [] } });
    const faulty: Record<string, FaultyDynamoDb> = {};
    const ledgers: Record<string, DynamoRateLedger> = {};
    for (const region of [HOME, PEER]) {
      const client = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
      faulty[region] = client;
      open.push({ close: () => client.client.destroy() });
      ledgers[region] = new DynamoRateLedger({
        client: client.client,
        tableName: await dynamo.createTable(`ledger-${region}`),
        clock,
        telemetry: new MemoryTelemetry(),
        // Not regional: what is under test is the shared learned item; a regional ledger grants nothing before a
        // lease, and a report answers a request a permit let through (docs/class-limits.md, I2).
        learnedTableName: learnedTable,
      });
    }
    const home = faulty[HOME] as FaultyDynamoDb;
    const peer = faulty[PEER] as FaultyDynamoDb;
    // The peer's learning write waits for the home Region's to apply, then meets MRSC's conflict on every attempt.
    const learnedWrite = (command: string, input: unknown) =>
      command === 'PutItem' &&
      ((input as Attempt['input']).Item as { pk?: { S?: string } } | undefined)?.pk?.S?.startsWith(
        'learned#',
      ) === true;
    let homeWritten: () => void = () => undefined;
    const written = new Promise<void>((resolve) => {
      homeWritten = resolve;
    });
    home.client.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (learnedWrite((context.commandName ?? '').replace(/Command$/, ''), args.input)) homeWritten();
        return result;
      },
      { step: 'initialize', name: 'homeLearnedFirst' },
    );
    peer.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (learnedWrite((context.commandName ?? '').replace(/Command$/, ''), args.input)) await written;
        return next(args);
      },
      { step: 'initialize', name: 'peerAfterHome' },
    );
    peer.faults.aim(({ command, input }) => learnedWrite(command, input), ...CONFLICTS);

    // The same honest answer, one caller in each Region: "10, 9 left, reset in 50 s".
    const report = (region: string, caller: string) =>
      (ledgers[region] as DynamoRateLedger).reportVendorFeedback({
        tokenId: '5c4b3a2918070605',
        caller,
        limits,
        setId: 'uat-advisor',
        class: CLASS,
        limit: 10,
        remaining: 9,
        reset: Math.floor(T0 / 1000) + 50,
      });
    for (const region of [HOME, PEER])
      await (ledgers[region] as DynamoRateLedger).acquire({
        tokenId: '5c4b3a2918070605',
        count: 1,
        class: CLASS,
        limits,
        setId: 'uat-advisor',
      });
    await Promise.all([
      report(HOME, 'arn:aws:iam::123456789012:role/report-service'),
      report(PEER, 'arn:aws:iam::123456789012:role/portfolio-service'),
    ]);
    expect(peer.faults.stats.log.filter((a) => a.fault === 'replicatedWriteConflict')).toHaveLength(3);
    // Both reports are in the one view: two callers naming 10 per 60 s keep it (T4), in both Regions.
    for (const region of [HOME, PEER]) {
      const view = (await (ledgers[region] as DynamoRateLedger).learned('uat-advisor'))[CLASS] ?? [];
      expect(view.map((l) => [l.limit, l.windowSeconds, l.until])).toEqual([[10, 60, undefined]]);
    }
  });

  it('a probe is shared: two Regions probing at once let at most one class request through per probe span, in total', async () => {
    const world = await worldOf(true);
    // Nobody reports: the class stays on the probe, 1 per 10 s (and the margin) for both Regions together.
    await world.run(T0 + 3 * MINUTE, { report: false });
    const all = world.grants.map((g) => ({ time: g.time, count: 1 }));
    const busiest = maxInAnySpan(all, PROBE_SPAN_MS - 1);
    const permits = world.permits();
    const figures = shown(`probe shared (${engine})`, { permits, busiestProbeSpan: busiest });
    expect(busiest, figures).toBe(1);
    // The probe budget was used, not stranded between the Regions: at least one grant per two probe spans.
    expect((permits[HOME] ?? 0) + (permits[PEER] ?? 0), figures).toBeGreaterThanOrEqual(
      Math.floor((3 * MINUTE) / PROBE_SPAN_MS / 2),
    );
    expect(world.vendorExcesses([{ limit: 1, windowSeconds: 10 }]), figures).toEqual([]);
  }, 120_000);

  /** Least privilege, as infra grants it: the renewer only reads learned items, the vend processes read and write
   * them, and only on the shared (MRSC) table. */
  function expectLearnedCalls(world: RegionsLearnedWorld, figures: string): void {
    const learnedCalls = world.sent.filter((c) => c.key?.startsWith('learned#'));
    const commands = (part: string) => [
      ...new Set(learnedCalls.filter((c) => c.part === part).map((c) => c.command)),
    ];
    expect(commands('renewer'), figures).toEqual(['GetItem']);
    expect(commands('vend').sort(), figures).toEqual(['GetItem', 'PutItem']);
    expect([...new Set(learnedCalls.map((c) => c.table))], figures).toEqual([world.sharedTable]);
  }

  async function figuresOf(world: RegionsLearnedWorld, name: string): Promise<string> {
    return shown(`${name} (${engine})`, {
      permits: world.permits(),
      vendor429s: world.refused,
      busiest: world
        .vendorSpans(FAMILY)
        .map((s) => `${s.family ?? 'general'} ${s.busiest}/${s.limit} per ${s.windowSeconds}s`),
      learned: { [HOME]: await world.learned(HOME), [PEER]: await world.learned(PEER) },
    });
  }

  it(`equal class demand below the limit in both Regions for ${DEMAND_MINUTES} minutes: both serve it, together within the vendor limit in every span (a6dc151 in 10 minutes: 40 and 0)`, async () => {
    const world = await worldOf(true);
    // Each Region wants 4 class requests a minute (two callers, one every 30 s each): 8 a minute of the vendor's 10.
    await world.run(T0 + DEMAND_MINUTES * MINUTE, {
      report: true,
      paceMs: 30_000,
      offsetMs: (i) => [0, 15_000, 7_500, 22_500][i] ?? 0,
    });
    const permits = world.permits();
    const figures = await figuresOf(world, 'learned class in two Regions, 4 a minute each');
    // The vendor's log is the judge: no span of any limit served more than it allows.
    expect(world.vendorExcesses(FAMILY), figures).toEqual([]);
    // Both Regions serve their demand (4 a minute each: 40 in 10 minutes), but for the first learning's probe
    // round trip (4).
    expect(Math.min(permits[HOME] ?? 0, permits[PEER] ?? 0), figures).toBeGreaterThanOrEqual(
      4 * DEMAND_MINUTES - 4,
    );
    // One view: both Regions see the same learned limit.
    expect(await world.learned(PEER), figures).toEqual(await world.learned(HOME));
    expectLearnedCalls(world, figures);
  }, 240_000);

  it(`equal greedy class demand in both Regions for ${DEMAND_MINUTES} minutes: both Regions lease the learned ring, together within the vendor limit in every span (a6dc151 in 10 minutes: 96 and 0)`, async () => {
    const world = await worldOf(true);
    // Each caller asks again a second after a grant, and when its denial says: the class's ring is always full.
    await world.run(T0 + DEMAND_MINUTES * MINUTE, { report: true });
    const permits = world.permits();
    const figures = await figuresOf(world, 'learned class in two Regions, greedy');
    expect(world.vendorExcesses(FAMILY), figures).toEqual([]);
    // The peer leases the learned ring and serves from it. How much is the lease rules' split: a Region that keeps
    // its share full keeps it (a share's target is what the Region uses plus its part of what is free,
    // lease.ts shareTargets), so under demand greedier than the limit the Region that learned first keeps most.
    expect(Math.min(permits[HOME] ?? 0, permits[PEER] ?? 0), figures).toBeGreaterThan(0);
    // 8 a minute of the vendor's 10 (80 in 10 minutes).
    expect((permits[HOME] ?? 0) + (permits[PEER] ?? 0), figures).toBeGreaterThanOrEqual(8 * DEMAND_MINUTES);
    expect(await world.learned(PEER), figures).toEqual(await world.learned(HOME));
    expectLearnedCalls(world, figures);
  }, 240_000);

  it("the control: learned items in each Region's own ledger table (as a6dc151 kept them) leave one Region without the class", async () => {
    const world = await worldOf(false);
    await world.run(T0 + CONTROL_MINUTES * MINUTE, { report: true });
    const permits = world.permits();
    const figures = await figuresOf(world, 'learned class, learned items per Region, greedy');
    // One Region learns and leases the learned ring; the other stays on its probe, whose share is 0.
    expect(Math.min(permits[HOME] ?? 0, permits[PEER] ?? 0), figures).toBe(0);
    expect(world.vendorExcesses(FAMILY), figures).toEqual([]);
  }, 240_000);
});
