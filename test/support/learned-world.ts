import { createHash } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { type Sandbox, type SandboxFamily, startSandbox, type WindowKind } from '../../sandbox/index.js';
import { createDynamoDbClient } from '../../shared/aws/dynamodb.js';
import { ManualClock } from '../../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import { DynamoRateLedger, type PermitDecision } from '../../shared/ledger/index.js';
import type { LocalDynamo } from './dynalite.js';
import { type Engine, startEngine } from './engines.js';
import { maxInAnySpan } from './ledger-harness.js';
import { call, type Reply, tokenFor } from './sandbox-http.js';

/**
 * A credential set's consumers of learned classes, as issue 32 reproduced its cases: each caller (a principal,
 * served by a vend process of its own: a DynamoRateLedger) takes a permit, sends the request to the vendor
 * sandbox over HTTP at once, and reports the answer's X-RateLimit-* with its class as client/rate-feedback.ts
 * does (each (token, class, limit, reset) once per caller, every 429), with the token's vendor clock offset as the
 * vend route passes it. Ledger, sandbox and callers share one manual clock.
 */

export const SET = 'uat-advisor';
export const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;
/** Two honest callers (principals), and a mistaken one. */
export const A = 'arn:aws:iam::123456789012:role/portfolio-service';
export const B = 'arn:aws:iam::123456789012:role/report-service';
export const LIAR = 'arn:aws:iam::123456789012:role/mistaken-service';
const USER = 'uat-advisor';
const PASSWORD = 'uat-advisor-sandbox-pw';

export interface Grant {
  /** Ledger time. */
  time: number;
  count: number;
  cls: string | undefined;
  by: string;
}

export interface Answer {
  /** Ledger time of the answer. */
  at: number;
  status: number;
  cls: string | undefined;
  limit: number;
  remaining: number;
  reset: number;
  by: string;
}

export interface WorldOptions {
  client: DynamoDBClient;
  tableName: string;
  clock: ManualClock;
  sandbox: Sandbox;
  limits: RateLimitSettings;
  /** The vendor's clock minus ours (s): the sandbox's clockOffsetSeconds. */
  vendorOffsetSeconds?: number;
}

/** The interval the refresher measures at login for a vendor `offsetMs` ahead (shared/tokens/vendor-offset.ts). */
export const measuredOffset = (offsetMs: number) => ({ lo: offsetMs - 1000, hi: offsetMs + 25 });

/** One set's vendor sandbox, ledger table, token and callers, and what they were granted and answered. */
export class LearnedWorld {
  readonly clock: ManualClock;
  readonly sandbox: Sandbox;
  readonly limits: RateLimitSettings;
  readonly grants: Grant[] = [];
  readonly answers: Answer[] = [];
  token = '';
  tokenId = '';
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #offsetMs: number;
  readonly callers: Caller[] = [];
  #sent = 0;

  constructor(options: WorldOptions) {
    this.#client = options.client;
    this.#tableName = options.tableName;
    this.clock = options.clock;
    this.sandbox = options.sandbox;
    this.limits = options.limits;
    this.#offsetMs = (options.vendorOffsetSeconds ?? 0) * 1000;
  }

  /** A new token (a login): a new ledger item; what the set learned stays. */
  async login(): Promise<void> {
    this.token = await tokenFor(this.sandbox.url, USER, PASSWORD);
    this.tokenId = createHash('sha256').update(this.token).digest('hex').slice(0, 16);
  }

  get vendorOffsetMs() {
    return measuredOffset(this.#offsetMs);
  }

  ledger(): DynamoRateLedger {
    return new DynamoRateLedger({
      client: this.#client,
      tableName: this.#tableName,
      clock: this.clock,
      random: () => 0,
      conflictJitterMs: 1,
    });
  }

  caller(principal: string): Caller {
    const caller = new Caller(this, principal, this.ledger());
    this.callers.push(caller);
    return caller;
  }

  /** Every vend process restarts: new ledger instances, nothing cached. */
  restart(): void {
    for (const caller of this.callers) caller.ledger = this.ledger();
  }

  /**
   * `n` requests of `cls` sent at once straight to the vendor (no permit): a use of the token the ledger does not
   * see (another service, another Region). Returns how many the vendor served.
   */
  async sendUnpermitted(cls: string | undefined, n = 1): Promise<number> {
    const replies = await Promise.all(
      Array.from({ length: n }, () =>
        call(this.sandbox.url, 'GET', this.#pathOf(cls), { token: this.token }),
      ),
    );
    return replies.filter((reply) => reply.status !== 429).length;
  }

  /** The request a permit let through (`cls` undefined: a general one). */
  async send(cls: string | undefined): Promise<Reply> {
    return call(this.sandbox.url, 'GET', this.#pathOf(cls), { token: this.token });
  }

  #pathOf(cls: string | undefined): string {
    const n = this.#sent++;
    return cls === undefined ? `/users/1/uat-advisor-tenant/serviceKey/k-${n}` : `/${cls}/r-${n}`;
  }

  /**
   * Greedy use of `cls` by `callers` until ledger time `until`: each asks again `gapMs` after a grant, and when
   * its denial says. Returns the grants of the run.
   */
  async greedy(
    callers: readonly Caller[],
    until: number,
    options: {
      cls?: string | undefined;
      gapMs?: number;
      /** After each ask. */
      after?: (step: Step) => Promise<void>;
      /** Things that happen at given ledger times (before the asks of that moment). */
      events?: { at: number; run: () => Promise<void> }[];
    } = {},
  ): Promise<Grant[]> {
    const cls = 'cls' in options ? options.cls : 'reports';
    const gapMs = options.gapMs ?? 250;
    const next = new Map(callers.map((c, i) => [c, this.clock.now() + i]));
    const events = [...(options.events ?? [])].sort((a, b) => a.at - b.at);
    const from = this.grants.length;
    for (;;) {
      const [caller, at] = [...next].reduce((a, b) => (b[1] < a[1] ? b : a));
      const event = events[0];
      if (event && event.at <= at && event.at < until) {
        events.shift();
        if (event.at > this.clock.now()) await this.clock.advance(event.at - this.clock.now());
        await event.run();
        continue;
      }
      if (at >= until) break;
      if (at > this.clock.now()) await this.clock.advance(at - this.clock.now());
      const step = await caller.use(cls);
      next.set(
        caller,
        this.clock.now() + (step.decision.granted ? gapMs : Math.max(50, step.decision.retryAfterMs)),
      );
      await options.after?.(step);
    }
    if (until > this.clock.now()) await this.clock.advance(until - this.clock.now());
    return this.grants.slice(from);
  }

  /** Vendor 429s to requests of `cls` answered in [from, to). */
  rejected(cls: string | undefined, from = 0, to = Number.POSITIVE_INFINITY): Answer[] {
    return this.answers.filter((a) => a.status === 429 && a.cls === cls && a.at >= from && a.at < to);
  }

  /** The most grants of `cls` in any span of `windowSeconds` among grants in [from, to). */
  mostInAnySpan(
    cls: string | undefined,
    windowSeconds: number,
    from = 0,
    to = Number.POSITIVE_INFINITY,
  ): number {
    return maxInAnySpan(
      this.grants.filter((g) => g.cls === cls && g.time >= from && g.time < to),
      windowSeconds * 1000 - 1,
    );
  }

  /** Grants of `cls` in [from, to). */
  granted(cls: string | undefined, from: number, to: number): number {
    return this.grants.filter((g) => g.cls === cls && g.time >= from && g.time < to).length;
  }
}

export interface Step {
  caller: Caller;
  decision: PermitDecision;
  reply?: Reply;
}

/** A consumer of the set (a principal) with the vend process that serves it. */
export class Caller {
  readonly #world: LearnedWorld;
  readonly principal: string;
  ledger: DynamoRateLedger;
  /** What client/rate-feedback.ts remembers: (token, class, limit, reset) already reported. */
  readonly #reported = new Set<string>();

  constructor(world: LearnedWorld, principal: string, ledger: DynamoRateLedger) {
    this.#world = world;
    this.principal = principal;
    this.ledger = ledger;
  }

  ask(cls: string | undefined, count = 1): Promise<PermitDecision> {
    const w = this.#world;
    return this.ledger.acquire({
      tokenId: w.tokenId,
      caller: this.principal,
      count,
      ...(cls === undefined ? {} : { class: cls }),
      limits: w.limits,
      setId: SET,
    });
  }

  /** A permit, the request it lets through, and the report of its answer. */
  async use(cls: string | undefined): Promise<Step> {
    const w = this.#world;
    const decision = await this.ask(cls);
    if (!decision.granted) return { caller: this, decision };
    w.grants.push({ time: decision.grantedAt, count: decision.count, cls, by: this.principal });
    const reply = await w.send(cls);
    await this.answered(cls, reply);
    return { caller: this, decision, reply };
  }

  /** Records and reports an answer as the client does: a class answer once per (limit, reset), every 429. */
  async answered(cls: string | undefined, reply: Reply): Promise<void> {
    const w = this.#world;
    const limit = Number(reply.headers.get('x-ratelimit-limit'));
    const remaining = Number(reply.headers.get('x-ratelimit-remaining'));
    const reset = Number(reply.headers.get('x-ratelimit-reset'));
    w.answers.push({
      at: w.clock.now(),
      status: reply.status,
      cls,
      limit,
      remaining,
      reset,
      by: this.principal,
    });
    const refused = reply.status === 429;
    const key = `${w.tokenId}/${cls}/${limit}/${reset}`;
    if (cls === undefined && !refused) return;
    if (!refused && this.#reported.has(key)) return;
    this.#reported.add(key);
    await this.report({
      ...(cls === undefined ? {} : { class: cls }),
      limit,
      remaining,
      reset,
      ...(refused ? { retryAfterSeconds: Number(reply.headers.get('retry-after')) } : {}),
    });
  }

  /** A report of this caller's, with the token's vendor clock offset as the vend route adds it. */
  report(fields: {
    class?: string;
    limit: number;
    remaining?: number;
    reset: number;
    retryAfterSeconds?: number;
  }) {
    const w = this.#world;
    return this.ledger.reportVendorFeedback({
      tokenId: w.tokenId,
      caller: this.principal,
      limits: w.limits,
      setId: SET,
      vendorOffsetMs: w.vendorOffsetMs,
      ...fields,
    });
  }

  /** What the set learned of `cls`, in force now: `L/Ws` for a kept limit, `L/Ws?` for one caller's word. */
  async learned(cls = 'reports'): Promise<string[]> {
    const view = (await this.ledger.learned(SET))[cls] ?? [];
    return [...view]
      .sort((a, b) => a.windowSeconds - b.windowSeconds || a.limit - b.limit)
      .map((l) => `${l.limit}/${l.windowSeconds}s${l.until === undefined ? '' : '?'}`);
  }
}

export type Limit = [limit: number, windowSeconds: number];

/** A vendor endpoint family under `/<name>/` with these limits. */
export const family = (name: string, ...limits: Limit[]): SandboxFamily => ({
  name,
  pathPrefix: `/${name}/`,
  limits: limits.map(([limit, windowSeconds]) => ({ limit, windowSeconds })),
});

/** Of learned limits (`L/Ws`, `L/Ws?`), those naming a vendor limit's L over a window shorter than its: looser. */
export const shorter = (learned: readonly string[], vendor: readonly Limit[]): string[] =>
  learned.filter((l) => {
    const [limit, window] = l.split('/').map((part) => Number.parseInt(part, 10));
    return vendor.some(([L, W]) => limit === L && (window as number) < W);
  });

/** A case's figures, for its assertions' messages (and printed with CASE_FIGURES=1). */
export function shown(name: string, figures: Record<string, unknown>): string {
  const text = `${name}: ${JSON.stringify(figures)}`;
  if (process.env.CASE_FIGURES) console.log(text);
  return text;
}

export interface WorldSetup {
  /** Vendor endpoint families, hidden from the ledger: each is a learned class (`[]`). */
  families: SandboxFamily[];
  windowKind?: WindowKind;
  /** The vendor's clock minus ours (s). */
  vendorOffsetSeconds?: number;
  /** Ledger time of the start: where in the vendor's windows the class is first used. */
  start: number;
  /** The vendor's general limits, and the set's (default: the vendor's documented ones). */
  general?: Limit[];
}

/**
 * The worlds of one DynamoDB engine's describe block: the engine started once, and per world a manual clock, a
 * vendor sandbox on it, a table and a first token (the sandbox is closed after each test).
 */
export function learnedWorlds(engine: Engine): (setup: WorldSetup) => Promise<LearnedWorld> {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  const open: Sandbox[] = [];
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterEach(async () => {
    for (const sandbox of open.splice(0)) await sandbox.close();
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });
  return async (setup) => {
    const clock = new ManualClock(setup.start);
    const vendorOffsetSeconds = setup.vendorOffsetSeconds ?? 0;
    const general = setup.general?.map(([limit, windowSeconds]) => ({ limit, windowSeconds }));
    const sandbox = await startSandbox({
      environment: 'uat',
      clock,
      quiet: true,
      recordRequests: true,
      families: setup.families,
      windowKind: setup.windowKind ?? 'fixed',
      clockOffsetSeconds: vendorOffsetSeconds,
      tokenLifetimeSeconds: 3 * 86_400,
      ...(general ? { limits: general } : {}),
    });
    open.push(sandbox);
    const limits: RateLimitSettings = rateLimitSettingsSchema.parse({
      ...(general ? { general } : {}),
      classes: Object.fromEntries(setup.families.map((f) => [f.name, []])),
    });
    const world = new LearnedWorld({
      client,
      tableName: await dynamo.createTable('learned-cases'),
      clock,
      sandbox,
      limits,
      vendorOffsetSeconds,
    });
    await world.login();
    return world;
  };
}
