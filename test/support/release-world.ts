import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { expect } from 'vitest';
import type { ManualClock } from '../../shared/clock.js';
import type { RateLimitSettings } from '../../shared/config/credential-sets.js';
import type {
  PermitDecision,
  PermitRequest,
  RateLedger,
  WindowRemaining,
} from '../../shared/ledger/index.js';
import { maxInAnySpan, type TimedCount } from './ledger-harness.js';
import type { LedgerRelease } from './previous-release.js';

/**
 * Two releases' ledgers on one table and one item, on one simulated clock, and the books of what they granted:
 * what a canary of the next release and a rollback to the last one do to the same ledger items.
 */

/** One process of a release: its ledger, and the settings as that release parses them. */
export interface Side {
  release: LedgerRelease;
  limits: RateLimitSettings;
  ledger: RateLedger;
}

/** A permit request without the token and the settings (the world's and the side's). */
export type Ask = Omit<PermitRequest, 'tokenId' | 'limits'>;

/** A grant as the books keep it: `kept` is what its consumer may still send (its count minus what it gave back). */
export interface Granted {
  by: string;
  caller: string;
  cls?: string;
  count: number;
  kept: number;
  grantedAt: number;
  validUntil: number;
  receipt: string;
  /** Given back (a receipt is good once). */
  returned?: boolean;
}

export const TOKEN = 'c4d5e6f708192a3b';

export class ReleaseWorld {
  readonly grants: Granted[] = [];

  constructor(
    readonly client: DynamoDBClient,
    readonly table: string,
    readonly clock: ManualClock,
    /** The settings, raw: each release parses them with its own schema. */
    readonly settings: unknown,
  ) {}

  /** A new process of `release` (its own ledger instance and cache) on this world's item. */
  side(release: LedgerRelease, client = this.client): Side {
    const ledger = new release.DynamoRateLedger({
      client,
      tableName: this.table,
      clock: this.clock,
      random: () => 0,
      conflictJitterMs: 2,
    });
    return { release, limits: release.parseLimits(this.settings), ledger };
  }

  /** The decision of `side` (a denial, or a grant entered in the books); a thrown error is the test's failure. */
  async ask(side: Side, ask: Ask): Promise<PermitDecision> {
    const decision = await side.ledger.acquire({ tokenId: TOKEN, limits: side.limits, ...ask });
    if (decision.granted)
      this.grants.push({
        by: side.release.name,
        caller: ask.caller ?? '',
        ...(ask.class === undefined ? {} : { cls: ask.class }),
        count: decision.count,
        kept: decision.count,
        grantedAt: decision.grantedAt,
        validUntil: decision.validUntil,
        receipt: decision.receipt,
      });
    return decision;
  }

  async grant(side: Side, ask: Ask): Promise<Granted> {
    const decision = await this.ask(side, ask);
    if (!decision.granted)
      throw new Error(`${side.release.name} denied ${JSON.stringify(ask)}: ${decision.reason}`);
    return this.grants.at(-1) as Granted;
  }

  async deny(side: Side, ask: Ask): Promise<Extract<PermitDecision, { granted: false }>> {
    const decision = await this.ask(side, ask);
    if (decision.granted)
      throw new Error(`${side.release.name} granted ${JSON.stringify(ask)}, expected a denial`);
    return decision;
  }

  /** Asks `count` at a time until denied, then 1 at a time until denied: to the limit. Returns the last denial. */
  async fill(side: Side, ask: Ask): Promise<Extract<PermitDecision, { granted: false }>> {
    let count = ask.count;
    for (let i = 0; i < 2000; i++) {
      const decision = await this.ask(side, { ...ask, count });
      if (!decision.granted && count === 1) return decision;
      if (!decision.granted) count = 1;
    }
    throw new Error(`${side.release.name} never denied ${JSON.stringify(ask)}`);
  }

  /**
   * `side` gives back `count` of a grant (by the caller it was made for): the consumer will not send them,
   * whatever the answer, so the books drop them first.
   */
  /** What came back: 0 when the ledger did not record it (a receipt the current release has no place for). */
  async giveBack(side: Side, grant: Granted, count: number): Promise<number> {
    const { returned } = await side.ledger.giveBack({
      tokenId: TOKEN,
      caller: grant.caller,
      receipt: grant.receipt,
      count,
      limits: side.limits,
    });
    grant.kept -= returned;
    grant.returned ||= returned > 0;
    return returned;
  }

  /** `side` fails closed on `ask`: LedgerUnavailableError of its own release, and no grant. */
  async failsClosed(side: Side, ask: Ask): Promise<void> {
    const before = this.grants.length;
    await expect(this.ask(side, ask)).rejects.toBeInstanceOf(side.release.LedgerUnavailableError);
    expect(this.grants).toHaveLength(before);
  }

  /** The windows of the settings (as `side`'s release parsed them), general and per class. */
  windows(side: Side): { limit: number; windowSeconds: number; cls?: string }[] {
    return [
      ...side.limits.general,
      ...Object.entries(side.limits.classes).flatMap(([cls, limits]) => limits.map((l) => ({ ...l, cls }))),
    ];
  }

  /** Kept permits of the books, as timed counts, of one class or (no class given) of every grant. */
  kept(cls?: string): TimedCount[] {
    return this.grants
      .filter((g) => cls === undefined || g.cls === cls)
      .map((g) => ({ time: g.grantedAt, count: g.kept }));
  }

  /** What the books hold in the span of a window that ends now (the window plus the margin). */
  keptInSpanEndingNow(side: Side, window: { windowSeconds: number; cls?: string }): number {
    const spanMs = window.windowSeconds * 1000 + side.limits.marginSeconds * 1000;
    const now = this.clock.now();
    return this.kept(window.cls)
      .filter((k) => k.time >= now - spanMs && k.time <= now)
      .reduce((sum, k) => sum + k.count, 0);
  }

  /**
   * The promise, whichever release granted: in no span of a window plus the margin do the kept permits of the
   * books exceed the window's limit, general or of a class. Returns the fullest span of each window.
   */
  expectBound(side: Side): number[] {
    const marginMs = side.limits.marginSeconds * 1000;
    return this.windows(side).map((w) => {
      const most = maxInAnySpan(this.kept(w.cls), w.windowSeconds * 1000 + marginMs);
      expect(most, `${w.cls ?? 'general'} ${w.limit}/${w.windowSeconds} s`).toBeLessThanOrEqual(w.limit);
      return most;
    });
  }

  /**
   * What `side` says is left never exceeds what the books leave: a release that misread the other's grants
   * would offer them again.
   */
  async expectRemainingSafe(side: Side): Promise<WindowRemaining[]> {
    const remaining = await side.ledger.remaining(TOKEN, side.limits);
    for (const window of this.windows(side)) {
      const entry = remaining.find(
        (r) => r.windowSeconds === window.windowSeconds && r.limit === window.limit && r.class === window.cls,
      );
      expect(entry, `${side.release.name} reports ${JSON.stringify(window)}`).toBeDefined();
      expect(entry?.remaining, `${side.release.name}: left of ${JSON.stringify(window)}`).toBeLessThanOrEqual(
        window.limit - this.keptInSpanEndingNow(side, window),
      );
    }
    return remaining;
  }
}
