import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, type TestFunction, it as vitestIt } from 'vitest';
import { defaultSandboxUsers, type Sandbox, startSandbox } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { CLOCK_BOUND_MS, LEASE_MS, RENEW_MS } from '../shared/regions/lease.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { enginesTakingTurns, FULL_RUNS } from './support/property-runs.js';
import { fakeSecretsManager } from './support/refresher-harness.js';
import {
  currentRelease,
  Deployment,
  type Release,
  releaseAt,
  type StageParts,
} from './support/regions-rehearsal.js';
import { type RegionState, RehearsalStage } from './support/rehearsal-stage.js';

/**
 * Issue 33: the rollback of a two-Region stage to release N-1, rehearsed as docs/deploying.md (Rolling back a
 * two-Region stage) writes it, on real parts: the sandbox vendor counting one user's budget (`rateLimitScope
 * user`, as the sets' `quotaScope: user` assumes) over sliding-span checks of its own log, each Region's ledger
 * table, one table standing for the MRSC table (tokens and leases; the engines have no MRSC, and one table is what
 * a strongly consistent read sees), each Region's lease renewer, and each step's functions of the release it
 * deploys, release N-1 from its own tree (a6dc151, the last landed release). Consumers in both Regions ask
 * permits every second (more than the minute limit allows: the bound is met all the time) and call the vendor with
 * each one; a class learned from the vendor's answers (`reports: []`) is asked in home only.
 *
 * Nothing lost, precisely: (1) tokens: every request of every step is served a token the vendor accepts, with one
 * login for the stage and one more when home's own tokens table takes over (rolling back and forward log in
 * again never); (2) grants: at each change of release, the release taking over counts what the one before granted
 * (what it says is left never exceeds the limit less what the vendor served in the span); (3) learned limits: the
 * class's learned limit is what each release holds it to after each step, never the probe again. Nothing over a
 * limit: no span of the vendor's log holds more than a limit, and the vendor refuses nothing.
 */
const N1 = 'a6dc151788fce1df21d7b674e85ed3f6c227623d';
const T0 = Date.UTC(2026, 10, 28, 12);
const HOME = 'eu-west-1';
const PEER = 'eu-central-1';
const GENERAL = [
  { limit: 20, windowSeconds: 10 },
  { limit: 100, windowSeconds: 60 },
];
const FAMILY = [{ limit: 5, windowSeconds: 10 }];
const MARGIN_MS = 3000;
const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** How long a canary serves a tenth of the requests (10 minutes by default; shortened here, as the windows are). */
const CANARY_MS = MINUTE;
/**
 * The wait of the procedure's step 2: the peer's grants out of every span once its lease ended (the longest window
 * plus the margin, the lease, the clock bound and one renewal of home's: docs/deploying.md).
 */
const PEER_DRAIN_MS = 60 * SECOND + MARGIN_MS + LEASE_MS + CLOCK_BOUND_MS + RENEW_MS;

/**
 * The control's limits: a longer window than the lease and the short window let one Region fill, as the vendor's
 * hour is (1000/3600 s), so that the peer's grants are still in its span once home has the whole budget.
 */
const CONTROL_GENERAL = [
  { limit: 20, windowSeconds: 10 },
  { limit: 100, windowSeconds: 180 },
];

const setInput = (vendorBaseUrl: string, general = GENERAL) => ({
  id: 'uat-advisor',
  environment: 'uat',
  companyRole: 'advisor',
  vendorBaseUrl,
  secretId: 'token-broker/uat-advisor',
  quotaScope: 'user',
  rateLimits: { general, classes: { reports: [] } },
});

/**
 * The release taking over counts what was granted before it (docs above, (2) and (3)): what it says is left of
 * each general window never exceeds the limit less what the vendor served in its span, and the class is held to
 * the limit home learned.
 */
async function expectTakesOver(
  stage: RehearsalStage,
  next: Deployment,
  learned: { limit: number; windowSeconds: number },
) {
  await next.readToken(stage.clock.now());
  const left = await next.ledger.remaining(next.ledgerKey(), next.set.rateLimits, next.set.id);
  for (const window of GENERAL) {
    const entry = left.find((w) => w.class === undefined && w.windowSeconds === window.windowSeconds);
    expect(entry?.remaining, `${next.label}: ${window.limit}/${window.windowSeconds} s`).toBeLessThanOrEqual(
      window.limit - stage.servedInSpan(window.windowSeconds),
    );
  }
  const cls = left.find((w) => w.class === 'reports');
  expect(cls && { limit: cls.limit, windowSeconds: cls.windowSeconds }, next.label).toEqual(learned);
}

/**
 * The rehearsal is a release run, the heaviest test of `npm test` (15-19 s): test:long runs it, on both engines
 * (issue 34 lets the release runs move there, for `npm test` in three minutes); `npm test` runs the control ("is
 * the wait of step 2…") on dynalite, test:long on both.
 */
const REHEARSAL = 'drops to one Region';

describe.each(enginesTakingTurns(ENGINES, 0, 'both engines'))(
  'a two-Region stage rolled back to N-1 (a6dc151) and forward again, on %s',
  (engine) => {
    const it = (name: string, fn: TestFunction, timeout?: number) => {
      if (FULL_RUNS || !name.startsWith(REHEARSAL)) vitestIt(name, fn, timeout);
    };
    let dynamo: LocalDynamo;
    let sandbox: Sandbox;
    let n1: Release;
    const clock = new ManualClock(T0);

    beforeAll(async () => {
      dynamo = await startEngine(engine);
      sandbox = await startSandbox({
        environment: 'uat',
        clock,
        quiet: true,
        recordRequests: true,
        rateLimitScope: 'user',
        windowKind: 'sliding',
        limits: GENERAL,
        families: [{ name: 'reports', pathPrefix: '/reports/', limits: FAMILY }],
        tokenLifetimeSeconds: 4 * 3600,
      });
      n1 = await releaseAt(N1);
    });
    afterAll(async () => {
      await sandbox?.close();
      await dynamo?.close();
    });

    /** One login's secret (Secrets Manager through its mock) and the stage's set, with these general limits. */
    const stageParts = (general: typeof GENERAL): StageParts => {
      const secrets = fakeSecretsManager();
      const user = defaultSandboxUsers('uat').find((u) => u.username === 'uat-advisor');
      secrets.put('token-broker/uat-advisor', { username: 'uat-advisor', password: user?.password ?? '' });
      return {
        client: dynamo.client,
        clock,
        sandbox,
        setInput: setInput(sandbox.url, general),
        credentials: secrets.source,
      };
    };
    const newStage = (general: typeof GENERAL) =>
      new RehearsalStage(clock, sandbox, {
        start: T0,
        regions: [HOME, PEER],
        general,
        family: { name: 'reports', limits: FAMILY },
        marginMs: MARGIN_MS,
      });

    it('drops to one Region, rolls back and forward, and comes back to two: nothing over a limit, nothing lost', async () => {
      const parts = stageParts(GENERAL);
      const table = (name: string) => dynamo.createTable(name);
      const [global, ledgerHome, ledgerPeer, tokensHome] = [
        await table('rehearsal-global'),
        await table('rehearsal-ledger-home'),
        await table('rehearsal-ledger-peer'),
        await table('rehearsal-tokens-home'),
      ];
      const logins = () => sandbox.stats().logins['uat-advisor']?.successes ?? 0;
      const stage = newStage(GENERAL);
      const home = stage.regions[HOME] as RegionState;
      const peer = stage.regions[PEER] as RegionState;
      const deploy = (label: string, release: Release, tables: ConstructorParameters<typeof Deployment>[3]) =>
        new Deployment(label, release, parts, tables);

      // A. Two Regions, the current release: one login for both, the budget split by the renewers.
      const homeA = deploy('A home', currentRelease, {
        tokens: global,
        ledger: ledgerHome,
        global,
        region: HOME,
      });
      const peerA = deploy('A peer', currentRelease, {
        tokens: global,
        ledger: ledgerPeer,
        global,
        region: PEER,
      });
      Object.assign(home, { serving: [homeA], refresher: homeA, renewer: homeA, classAsks: true });
      Object.assign(peer, { serving: [peerA], refresher: peerA, renewer: peerA });
      await homeA.refresher.runScheduled();
      await stage.run(3 * MINUTE);
      expect(logins()).toBe(1);
      expect(stage.figures.granted.get('A peer')).toBeGreaterThan(0);
      const learned = (await homeA.ledger.learned(homeA.set.id)).reports?.map((l) => ({
        limit: l.limit,
        windowSeconds: l.windowSeconds,
      }));
      expect(learned).toEqual([{ limit: 5, windowSeconds: 10 }]);
      const learnedLimit = learned?.[0] as { limit: number; windowSeconds: number };

      // B. Down to one Region (the procedure's steps 1-3).
      // 1. The peer's services fail over to home; the peer's serving stack is destroyed (vend and renewer gone).
      Object.assign(peer, { serving: [], refresher: undefined, renewer: undefined });
      home.rate = 2.4;
      // 2. Home keeps its renewer until the peer's grants left every span: then its share is the whole budget.
      await stage.run(PEER_DRAIN_MS + 6 * SECOND);
      expect(stage.lastShares.get(HOME)).toMatchObject({ '*/7ps': 20, '*/1aao': 100 });
      // 3. Home deployed without `regions`: its refresher on its own tokens table at once (one login), its vend
      // function shifted by the canary, the renewer deleted after the shift (CloudFormation's clean-up).
      const homeB = deploy('B home, one Region', currentRelease, { tokens: tokensHome, ledger: ledgerHome });
      await homeB.refresher.runScheduled();
      expect(logins()).toBe(2);
      await expectTakesOver(stage, homeB, learnedLimit);
      Object.assign(home, { serving: [homeA, homeB], canary: 0.1, refresher: homeB });
      await stage.run(CANARY_MS);
      Object.assign(home, { serving: [homeB], canary: 0, renewer: undefined });
      const beforeAlone = stage.figures.granted.get(homeB.label) ?? 0;
      await stage.run(2 * MINUTE);
      // Alone, home has the whole budget once its last lease lapsed: the minute's 100, not its floor.
      expect((stage.figures.granted.get(homeB.label) ?? 0) - beforeAlone).toBeGreaterThanOrEqual(150);

      // Before N-1: no ledger item of home still carries a share (N-1 would hold it to its floor): the current
      // release took it out at its first write after the lease lapsed (the procedure's check, a scan).
      const shares = await dynamo.client.send(
        new ScanCommand({
          TableName: ledgerHome,
          // The ledger items only: `rs` of a `learned#` item is its rises (learned-store.ts), not a share.
          FilterExpression: 'begins_with(pk, :token) AND attribute_exists(rs)',
          ExpressionAttributeValues: { ':token': { S: 'token#' } },
          ProjectionExpression: 'pk',
          ConsistentRead: true,
        }),
      );
      expect(shares.Items).toEqual([]);

      // C. Roll back to N-1 (its refresher at once, its vend through the canary).
      const homeC = deploy(`C home, ${n1.name}`, n1, { tokens: tokensHome, ledger: ledgerHome });
      await expectTakesOver(stage, homeC, learnedLimit);
      Object.assign(home, { serving: [homeB, homeC], canary: 0.1, refresher: homeC });
      await stage.run(CANARY_MS);
      Object.assign(home, { serving: [homeC], canary: 0 });
      await stage.run(MINUTE);
      expect(stage.figures.granted.get(homeC.label)).toBeGreaterThan(0);

      // D. Forward again: the current release in one Region.
      const homeD = deploy('D home, current again', currentRelease, {
        tokens: tokensHome,
        ledger: ledgerHome,
      });
      await expectTakesOver(stage, homeD, learnedLimit);
      Object.assign(home, { serving: [homeC, homeD], canary: 0.1, refresher: homeD });
      await stage.run(CANARY_MS);
      Object.assign(home, { serving: [homeD], canary: 0 });
      await stage.run(MINUTE);

      // E. Two Regions again: home's stack regional (renewer first, vend through the canary), the peer's stack new
      // (an empty ledger table), tokens on the MRSC table again: its token is still good, so no login.
      const ledgerPeerE = await table('rehearsal-ledger-peer-2');
      const homeE = deploy('E home', currentRelease, {
        tokens: global,
        ledger: ledgerHome,
        global,
        region: HOME,
      });
      const peerE = deploy('E peer', currentRelease, {
        tokens: global,
        ledger: ledgerPeerE,
        global,
        region: PEER,
      });
      Object.assign(home, {
        serving: [homeD, homeE],
        canary: 0.1,
        refresher: homeE,
        renewer: homeE,
        rate: 1.2,
      });
      Object.assign(peer, { serving: [peerE], refresher: peerE, renewer: peerE });
      await stage.run(CANARY_MS);
      // Then demand within the budget in both Regions: each is served what it asks (the peer's share comes back
      // as home's grants leave the span; with demand above the budget in both, the renewers split it unevenly).
      Object.assign(home, { serving: [homeE], canary: 0, rate: 0.6, classAsks: false });
      peer.rate = 0.6;
      const peerBefore = stage.figures.granted.get(peerE.label) ?? 0;
      await stage.run(90 * SECOND);
      expect((stage.figures.granted.get(peerE.label) ?? 0) - peerBefore).toBeGreaterThanOrEqual(30);
      expect(stage.figures.granted.get(homeE.label)).toBeGreaterThan(0);
      const lastLearned = (await homeE.ledger.learned(homeE.set.id)).reports?.map((l) => ({
        limit: l.limit,
        windowSeconds: l.windowSeconds,
      }));
      expect(lastLearned).toEqual(learned);

      // Nothing over a limit, nothing lost.
      expect(stage.vendorExcesses()).toEqual([]);
      expect(stage.figures.noToken).toBe(0);
      expect([...stage.figures.vendorStatuses.keys()].filter((s) => s !== 200 && s !== 404)).toEqual([]);
      expect(logins()).toBe(2);
      if (process.env.REHEARSAL_FIGURES) stage.print(engine, logins());
    }, 600_000);

    it("is the wait of step 2 that keeps the bound: home alone at once, with the peer's grants in the span, goes over", async () => {
      sandbox.resetStats();
      await clock.advance(5 * MINUTE);
      const parts = stageParts(CONTROL_GENERAL);
      sandbox.update({ limits: CONTROL_GENERAL });
      const table = (name: string) => dynamo.createTable(name);
      const [global, ledgerHome, ledgerPeer, tokensHome] = [
        await table('control-global'),
        await table('control-ledger-home'),
        await table('control-ledger-peer'),
        await table('control-tokens-home'),
      ];
      const stage = newStage(CONTROL_GENERAL);
      const home = stage.regions[HOME] as RegionState;
      const peer = stage.regions[PEER] as RegionState;
      const homeA = new Deployment('A home', currentRelease, parts, {
        tokens: global,
        ledger: ledgerHome,
        global,
        region: HOME,
      });
      const peerA = new Deployment('A peer', currentRelease, parts, {
        tokens: global,
        ledger: ledgerPeer,
        global,
        region: PEER,
      });
      // Most of the demand in the peer, so that most of the budget's grants are the peer's when it goes.
      Object.assign(home, {
        serving: [homeA],
        refresher: homeA,
        renewer: homeA,
        classAsks: false,
        rate: 0.3,
      });
      Object.assign(peer, { serving: [peerA], refresher: peerA, renewer: peerA, rate: 2.4 });
      await homeA.refresher.runScheduled();
      await stage.run(5 * MINUTE);
      expect(stage.vendorExcesses()).toEqual([]);
      // Step 2 skipped: home one Region at once (renewer and peer gone together), its services and the peer's on it.
      const homeB = new Deployment('B home', currentRelease, parts, {
        tokens: tokensHome,
        ledger: ledgerHome,
      });
      await homeB.refresher.runScheduled();
      Object.assign(peer, { serving: [], refresher: undefined, renewer: undefined });
      Object.assign(home, { serving: [homeB], refresher: homeB, renewer: undefined, rate: 2.7 });
      await stage.run(90 * SECOND);
      if (process.env.REHEARSAL_FIGURES) stage.print(`${engine} (control)`, 0);
      // The vendor refuses what home granted beyond the peer's grants still in its span (77 of its 80 when measured).
      expect(stage.vendorExcesses().length).toBeGreaterThanOrEqual(20);
      sandbox.update({ limits: GENERAL });
    }, 300_000);
  },
);
