import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { busiestSpans, type SpanFigure, spanExcesses } from '../../local/soak-report.js';
import type { Sandbox } from '../../sandbox/index.js';
import { createDynamoDbClient } from '../../shared/aws/dynamodb.js';
import type { ManualClock } from '../../shared/clock.js';
import type { CredentialSetConfig } from '../../shared/config/credential-sets.js';
import { RegionalRateLedger } from '../../shared/ledger/index.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import { RENEW_MS } from '../../shared/regions/lease.js';
import { LeaseStore } from '../../shared/regions/lease-store.js';
import { LeaseRenewer } from '../../shared/regions/renewer.js';
import { vendorOffsetOf } from '../../shared/tokens/vendor-offset.js';
import { ledgerKeyFor } from '../../shared/vend/ledger-key.js';
import type { LocalDynamo } from './dynalite.js';
import { credentialSet, startWorld } from './refresher-harness.js';
import { call, type Reply } from './sandbox-http.js';

/**
 * A two-Region stage's learned class on real parts (docs/multi-region.md, "Learned limits"): one vendor sandbox
 * over HTTP with a class family the broker is not told of, one login (the refresher's) serving both Regions, one
 * shared table standing for the MRSC table (the token item `set#`, the lease items `lease#` and, when `shared`,
 * the learned item `learned#`), and per Region a regional ledger table, its lease renewer and callers, each
 * caller a vend process of its own (a RegionalRateLedger with `regional: true`). A caller takes a class permit,
 * sends the request at once, and reports the answer as client/rate-feedback.ts does (each (token, class, limit,
 * reset) once per caller, every 429), with the token's vendor clock offset as the vend route adds it. Everything
 * on one ManualClock; each Region's renewer renews as renewUntil does (every RENEW_MS, sooner at a KeyRenewal's
 * nextAt).
 */

export const HOME = 'eu-west-1';
export const PEER = 'eu-central-1';
export const REGIONS = [HOME, PEER] as const;
export const CLASS = 'reports';
const SET_ID = 'uat-advisor';

export interface ClassGrant {
  region: string;
  caller: string;
  /** Ledger time. */
  time: number;
}

/** A DynamoDB command as one of the world's clients sent it: which Region's part, the table, the item's key. */
export interface SentCommand {
  region: string;
  part: 'vend' | 'renewer';
  command: string;
  table: string | undefined;
  key: string | undefined;
}

export interface RegionsLearnedOptions {
  dynamo: LocalDynamo;
  clock: ManualClock;
  sandbox: Sandbox;
  /**
   * Where the learned items are: `true`, on the shared table (this release in a two-Region stage); `false`, in each
   * Region's own ledger table (as a6dc151 kept them, and a one-Region stage does).
   */
  shared: boolean;
  /** Callers per Region (each a vend process of its own). Default 2. */
  callersPerRegion?: number;
}

interface Caller {
  region: string;
  principal: string;
  ledger: RegionalRateLedger;
  /** (token, class, limit, reset) already reported, as the client remembers them. */
  reported: Set<string>;
  /** When it asks next. */
  nextAt: number;
  /** Paced demand: when its next request is wanted (each wanted request is asked for until granted). */
  wantAt: number;
}

/** Both Regions' parts, started: call `start()` before anything else. */
export class RegionsLearnedWorld {
  readonly clock: ManualClock;
  readonly sandbox: Sandbox;
  readonly grants: ClassGrant[] = [];
  /** Vendor answers to class requests, by Region: 429s. */
  readonly refused: Record<string, number> = { [HOME]: 0, [PEER]: 0 };
  readonly sent: SentCommand[] = [];
  set!: CredentialSetConfig;
  /** The shared table: the token, lease and (when shared) learned items. */
  sharedTable = '';
  ledgerKey = '';
  readonly #options: RegionsLearnedOptions;
  readonly #callers: Caller[] = [];
  readonly #renewers = new Map<string, { renewer: LeaseRenewer; nextAt: number }>();
  readonly #clients: DynamoDBClient[] = [];
  #token = '';
  #offset: { lo: number; hi: number } = { lo: 0, hi: 0 };
  #requests = 0;

  constructor(options: RegionsLearnedOptions) {
    this.clock = options.clock;
    this.sandbox = options.sandbox;
    this.#options = options;
  }

  /** A client of one Region's part that records what it sends (the item's key included). */
  #client(region: string, part: SentCommand['part']): DynamoDBClient {
    const client = createDynamoDbClient({ endpoint: this.#options.dynamo.endpoint });
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as {
          TableName?: string;
          Key?: { pk?: { S?: string } };
          Item?: { pk?: { S?: string } };
        };
        this.sent.push({
          region,
          part,
          command: (context.commandName ?? '').replace(/Command$/, ''),
          table: input.TableName,
          key: input.Key?.pk?.S ?? input.Item?.pk?.S,
        });
        return next(args);
      },
      { step: 'initialize', name: 'recordCommands' },
    );
    this.#clients.push(client);
    return client;
  }

  async start(): Promise<void> {
    const { dynamo, clock, sandbox, shared } = this.#options;
    const world = await startWorld(clock, dynamo);
    this.sharedTable = world.table;
    this.set = credentialSet({
      id: SET_ID,
      vendorBaseUrl: sandbox.url,
      rateLimits: { classes: { [CLASS]: [] } },
    });
    world.storeCredentialsOf(this.set, 'uat-advisor', sandbox);
    await world.refresher(`${HOME}/refresher`, [this.set]).runScheduled();
    const token = (await world.store.read(SET_ID, clock.now()))?.current;
    if (!token) throw new Error('the refresher logged in to no token');
    this.#token = token.accessToken;
    this.#offset = vendorOffsetOf(token);
    this.ledgerKey = ledgerKeyFor(this.set, token.tokenId);
    for (const region of REGIONS) {
      const ledgerTable = await dynamo.createTable(`ledger-${region}`);
      const ledger = (client: DynamoDBClient) =>
        new RegionalRateLedger({
          client,
          tableName: ledgerTable,
          clock,
          telemetry: new MemoryTelemetry(),
          regional: true,
          random: () => 0,
          conflictJitterMs: 1,
          ...(shared ? { learnedTableName: this.sharedTable } : {}),
        });
      const renewerClient = this.#client(region, 'renewer');
      const renewer = new LeaseRenewer({
        region,
        sets: [this.set],
        tokens: world.store,
        ledger: ledger(renewerClient),
        leases: new LeaseStore({ client: renewerClient, tableName: this.sharedTable }),
        clock,
        telemetry: new MemoryTelemetry(),
      });
      this.#renewers.set(region, { renewer, nextAt: clock.now() });
      for (let i = 0; i < (this.#options.callersPerRegion ?? 2); i++) {
        this.#callers.push({
          region,
          principal: `arn:aws:iam::123456789012:role/report-service-${region}-${i}`,
          ledger: ledger(this.#client(region, 'vend')),
          reported: new Set(),
          nextAt: clock.now() + i,
          wantAt: clock.now() + i,
        });
      }
    }
  }

  close(): void {
    for (const client of this.#clients) client.destroy();
  }

  /**
   * Until ledger time `until`: each Region's renewals when due, and every caller asking for a class permit, again
   * when its denial says (at least 50 ms later) and after a grant: `gapMs` later (greedy demand, default 1 s), or
   * with `paceMs`, when its next request is wanted (one every `paceMs` per caller, the first `offsetMs` in; a
   * request not granted at once is asked for until it is). `report`: the answers are reported.
   */
  async run(
    until: number,
    options: { report: boolean; gapMs?: number; paceMs?: number; offsetMs?: (index: number) => number },
  ): Promise<void> {
    const gapMs = options.gapMs ?? 1000;
    const { paceMs } = options;
    if (paceMs !== undefined)
      this.#callers.forEach((caller, i) => {
        caller.wantAt = this.clock.now() + (options.offsetMs?.(i) ?? 0);
        caller.nextAt = caller.wantAt;
      });
    for (;;) {
      const [region, due] = [...this.#renewers].reduce((a, b) => (b[1].nextAt < a[1].nextAt ? b : a));
      const caller = this.#callers.reduce((a, b) => (b.nextAt < a.nextAt ? b : a));
      const at = Math.min(due.nextAt, caller.nextAt);
      if (at >= until) break;
      if (at > this.clock.now()) await this.clock.advance(at - this.clock.now());
      if (due.nextAt <= caller.nextAt) {
        const round = await due.renewer.renewAll();
        due.nextAt = Math.min(this.clock.now() + RENEW_MS, ...round.map((r) => r.nextAt));
        if (round.length === 0) throw new Error(`${region}: no ledger key to renew`);
        continue;
      }
      const decision = await caller.ledger.acquire({
        tokenId: this.ledgerKey,
        caller: caller.principal,
        count: 1,
        class: CLASS,
        limits: this.set.rateLimits,
        setId: SET_ID,
      });
      if (!decision.granted) {
        caller.nextAt = this.clock.now() + Math.max(50, decision.retryAfterMs);
        continue;
      }
      this.grants.push({ region: caller.region, caller: caller.principal, time: decision.grantedAt });
      const reply = await call(this.sandbox.url, 'GET', `/${CLASS}/r-${this.#requests++}`, {
        token: this.#token,
      });
      if (reply.status === 429) this.refused[caller.region] = (this.refused[caller.region] ?? 0) + 1;
      if (options.report) await this.#answered(caller, reply);
      if (paceMs === undefined) caller.nextAt = this.clock.now() + gapMs;
      else {
        caller.wantAt += paceMs;
        caller.nextAt = Math.max(this.clock.now() + 1, caller.wantAt);
      }
    }
    if (until > this.clock.now()) await this.clock.advance(until - this.clock.now());
  }

  /** A class answer reported once per (token, class, limit, reset) and caller, every 429 (client/rate-feedback.ts). */
  async #answered(caller: Caller, reply: Reply): Promise<void> {
    const limit = Number(reply.headers.get('x-ratelimit-limit'));
    const remaining = Number(reply.headers.get('x-ratelimit-remaining'));
    const reset = Number(reply.headers.get('x-ratelimit-reset'));
    const refused = reply.status === 429;
    const key = `${limit}/${reset}`;
    if (!refused && caller.reported.has(key)) return;
    caller.reported.add(key);
    await caller.ledger.reportVendorFeedback({
      tokenId: this.ledgerKey,
      caller: caller.principal,
      limits: this.set.rateLimits,
      setId: SET_ID,
      class: CLASS,
      limit,
      remaining,
      reset,
      ...(refused ? { retryAfterSeconds: Number(reply.headers.get('retry-after')) } : {}),
      vendorOffsetMs: this.#offset,
    });
  }

  /** Class grants per Region in [from, to) of ledger time. */
  permits(from = 0, to = Number.POSITIVE_INFINITY): Record<string, number> {
    const inRange = this.grants.filter((g) => g.time >= from && g.time < to);
    return Object.fromEntries(REGIONS.map((r) => [r, inRange.filter((g) => g.region === r).length]));
  }

  /** What the vendor served in its busiest span of each limit (general, and the class family's). */
  vendorSpans(family: readonly { limit: number; windowSeconds: number }[]): SpanFigure[] {
    return busiestSpans(this.sandbox.requestLog(), [
      { family: undefined, limits: this.set.rateLimits.general },
      { family: CLASS, limits: family },
    ]);
  }

  vendorExcesses(family: readonly { limit: number; windowSeconds: number }[]): string[] {
    return spanExcesses(this.vendorSpans(family));
  }

  /** What the set learned of the class, in force, as `region` sees it (`L/Ws`, `L/Ws?` for one caller's word). */
  async learned(region: string): Promise<string[]> {
    const caller = this.#callers.find((c) => c.region === region);
    const view = (await caller?.ledger.learned(SET_ID))?.[CLASS] ?? [];
    return [...view]
      .sort((a, b) => a.windowSeconds - b.windowSeconds || a.limit - b.limit)
      .map((l) => `${l.limit}/${l.windowSeconds}s${l.until === undefined ? '' : '?'}`);
  }
}
