import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Clock, systemClock } from '../clock.js';
import type { RateLimitSettings } from '../config/rate-limits.js';
import { SILENT_TELEMETRY, type Telemetry } from '../telemetry.js';
import { InvalidPermitCountError, LedgerUnavailableError, ReceiptRejectedError } from './errors.js';
import { type Change, ItemWriter, type Snapshot } from './item/index.js';
import { nextPlanIn, planIn } from './learned-reports.js';
import { LearnedStore, type LearnedView } from './learned-store.js';
import { type ClockReference, LedgerClock } from './ledger-clock.js';
import {
  type LedgerCore,
  learnedStatus,
  type RequestPlan,
  remainingOf,
  reportFeedback,
  usageOf,
} from './ledger-reports.js';
import { type LedgerState, stateAt } from './ledger-state.js';
import { type LimitPlan, largestGrant, planFor, reservedConsumer } from './limit-plan.js';
import {
  type Applied,
  checkClass,
  checkPermit,
  countDenied,
  type GiveBackInput,
  type GrantInput,
  giveBack,
  grant,
  heldBy,
  NO_PENDING_ASKS,
  type Outcome,
  shareLapsed,
} from './operations/index.js';
import { callerTag, receiptTtlMs } from './receipts.js';
import type {
  GiveBackRequest,
  GiveBackResult,
  LearnedLimitStatus,
  LedgerUsage,
  PermitDecision,
  PermitRequest,
  RateLedger,
  VendorFeedbackReport,
  VendorFeedbackResult,
  WindowRemaining,
} from './types.js';
import { checkGiveBack } from './validation.js';

export interface DynamoRateLedgerOptions {
  client: DynamoDBClient;
  tableName: string;
  clock?: Clock;
  telemetry?: Telemetry;
  /**
   * Conditional-write conflicts (other processes wrote first) retried before failing closed. Default 30: every
   * write carries an id, and the item keeps 12 of a slot's, so in a second busier than that the writers take
   * turns with full writes; at 8 and 32 instances hammering one token (limits out of reach) 12 retries failed
   * about one ask in a hundred closed, 30 none (`npm run bench -- ledger`, REAL time rows). The pauses between
   * retries stay under a third of a second each.
   */
  maxConflictRetries?: number;
  /** Upper bound of the random real-time pause before conflict retry 1, doubled for each further one. */
  conflictJitterMs?: number;
  /** For the spread of retry hints and conflict pauses; default Math.random. */
  random?: () => number;
  /** Draws a candidate write id (tests force a collision with it); default 30 random bits (receipts.ts). */
  drawWriteId?: () => string;
  /**
   * How long (clock ms) what this process last learned of an item is good enough to build a write on. Older, it
   * reads first: another process has probably written since, and a refused write costs more than a read.
   * Default 1000.
   */
  cacheFreshMs?: number;
  /**
   * DynamoDB's clock as this process sees it (shared/aws/dynamodb-date-reference.ts on `client`, with `clock`):
   * ledger time is then corrected to it (ledger-clock.ts). Unset: `clock` is the ledger's time.
   */
  reference?: ClockReference;
  /** How long (clock ms) a set's learned limits are used before reading them again (learned-store.ts). Default 5000. */
  learnedCacheMs?: number;
  /**
   * The table of the sets' learned limits (`learned#<setId>` items, learned-store.ts): in a two-Region stage the
   * MRSC table, so that both Regions learn into, hold and lease one learned view (docs/multi-region.md, "Learned
   * limits"). Default: `tableName`, as in a one-Region stage.
   */
  learnedTableName?: string;
  /**
   * This ledger is one Region's of two (issue 27, docs/multi-region.md): grants are held to the share its lease
   * renewer adopted (adoptShare), and an item without one (before the first lease, or after its TTL) grants only
   * the floor, 0. Unset: an item without a share is as it always was, and a share in the item holds only until
   * its fence (a version beside a regional one in a canary, or a stage gaining a peer); a lapsed share is one a
   * stage left when it went back to one Region: not held, and removed by the item's next write.
   */
  regional?: boolean;
}

/**
 * Retry hints are spread over up to 1 % of the shortest window (at most 1 s), so that the consumers told to
 * wait do not all come back in the same millisecond and race for the same write: the first of them still
 * comes back close to the earliest moment.
 */
const HINT_SPREAD = 0.01;
const MAX_HINT_SPREAD_MS = 1000;

/** An operation's result as the write loop takes it: what changed, and the outcome as its result. */
const outcomeOf = <O extends Outcome>({ change, outcome }: Applied<O>): { change: Change; result: O } => ({
  change,
  result: outcome,
});

/**
 * The rate ledger on DynamoDB: one item per access token; each batch of changes is ONE conditional UpdateItem
 * built on what this process learned of the item within the last second (else on a consistent read), retried
 * on fresh state on conflict.
 * Concurrent grants in the same slot add to it instead of conflicting (item/write-loop.ts grantAdditions). A denial writes
 * nothing to the rings and is always decided on a fresh read; a regional ledger counts its denied asks in `dq`
 * (an ADD outside this protocol, at most one a second per key and process: #countAsked). No answer from DynamoDB, no permit.
 *
 * Exactly once, whatever is retried. Every write carries a write id, kept for a while in the item's id set
 * (receipts.ts), and every write is conditional in a way that a second copy of it fails: a full write on the
 * version it read, a head addition on "my write id is not in the set yet". When the SDK re-sends a write whose
 * answer was lost, the copy fails its condition; when a write fails (its condition, or for good after the
 * SDK's retries), the item is read and the write id decides: there, the write was applied (by an earlier
 * attempt) and its results stand; absent, someone else wrote and the batch is decided again on fresh state.
 * Why ids in the item, rather than turning SDK retries off: a lost answer is ambiguous whoever retries, and
 * only the item can say what happened to it; the version alone cannot, once others have written after us.
 * A full write replaces the ids with its own and carries the ones before it (the newest CARRIED_WRITE_IDS), so a
 * write applied just before someone's full write is still told: a grant is never counted twice and a give-back
 * that applied never finds its own receipt spent. No write goes without an id: where the item's set has no room
 * for one more (a busy second), the batch is a full write, which resets it. Only a write that more than
 * CARRIED_WRITE_IDS later writes have passed before its re-send arrives could no longer be told (the SDK's
 * retries take a few hundred milliseconds; that many writes take seconds at the vendor's 50 a minute): a grant
 * would then be counted twice (wasted quota, never an excess). Vendor feedback carries absolute times, so
 * applying it again changes nothing.
 */
export class DynamoRateLedger implements RateLedger {
  readonly #items: ItemWriter;
  readonly #clock: Clock;
  readonly #time: LedgerClock;
  readonly #telemetry: Telemetry;
  readonly #random: () => number;
  /** By ledger key: denied asks not yet counted in the item, and when this process last counted (#countAsked). */
  readonly #asked = new Map<string, { count: number; writtenAt: number }>();
  readonly #learned: LearnedStore;
  readonly #regional: boolean;
  /** What the reports and the learned status (ledger-reports.ts) use of this ledger. */
  readonly #core: LedgerCore;

  constructor(options: DynamoRateLedgerOptions) {
    this.#clock = options.clock ?? systemClock;
    this.#telemetry = options.telemetry ?? SILENT_TELEMETRY;
    this.#time = new LedgerClock({
      local: this.#clock,
      reference: options.reference,
      telemetry: this.#telemetry,
    });
    this.#random = options.random ?? Math.random;
    const regional = options.regional ?? false;
    this.#regional = regional;
    // The plan `state`'s share holds grants to at g (operations/grant.ts).
    const held = (plan: LimitPlan, state: LedgerState, g: number) => heldBy(plan, state, g, regional);
    this.#items = new ItemWriter({
      client: options.client,
      tableName: options.tableName,
      clock: this.#clock,
      time: this.#time,
      telemetry: this.#telemetry,
      maxConflictRetries: options.maxConflictRetries ?? 30,
      jitterMs: options.conflictJitterMs ?? 10,
      random: this.#random,
      cacheFreshMs: options.cacheFreshMs ?? 1000,
      held,
      lapsed: (state, g) => shareLapsed(state, g, regional),
      drawWriteId: options.drawWriteId,
    });
    this.#learned = new LearnedStore({
      client: options.client,
      tableName: options.learnedTableName ?? options.tableName,
      clock: this.#clock,
      cacheMs: options.learnedCacheMs,
    });
    this.#core = {
      items: this.#items,
      learned: this.#learned,
      telemetry: this.#telemetry,
      regional: this.#regional,
      planOf: (limits, setId, fresh) => this.#planOf(limits, setId, fresh),
      planned: (limits, base, view) => this.#planned(limits, base, view),
      viewTime: (base) => this.#viewTime(base),
      readAt: (tokenId, plan) => this.#readAt(tokenId, plan),
      held,
    };
  }

  /** The plan for these settings and the set's learned view (cached; `fresh`: read it again). */
  async #planOf(limits: RateLimitSettings, setId: string | undefined, fresh = false): Promise<RequestPlan> {
    const base = planFor(limits);
    if (base.learned.size === 0 || setId === undefined) return { plan: base, version: 0 };
    const view = await this.#learned.view(setId, fresh);
    return this.#planned(limits, base, view);
  }

  #planned(limits: RateLimitSettings, base: LimitPlan, view: LearnedView): RequestPlan {
    const now = this.#viewTime(base);
    return {
      plan: planIn(limits, base, view, now),
      version: view.version,
      next: nextPlanIn(limits, base, view, now),
    };
  }

  /**
   * The time a learned view is read at: ledger time (the provisional limits' ends are ledger time); the process's
   * own clock while ledger time is not known yet, when no grant can be decided anyway (ledger-clock.ts).
   */
  #viewTime(base?: LimitPlan): number {
    try {
      return this.#time.now(base ? [base] : []);
    } catch {
      return this.#clock.now();
    }
  }

  /** For the regional subclass (regional-ledger.ts): its plans, reads, write loop and telemetry. */
  protected get core(): LedgerCore {
    return this.#core;
  }

  /**
   * What the set learned of its classes' limits, in force now (a fresh read: the operator's status). With the
   * set's `limits` (its margin sizes a trial, R2), each kept limit under a rise trial carries it.
   */
  learned(setId: string, limits?: RateLimitSettings): Promise<Record<string, LearnedLimitStatus[]>> {
    return learnedStatus(this.#core, setId, limits);
  }

  /**
   * The most one grant can ever give this consumer (largestGrant), on the plan its permits are decided on: a
   * learned class's as the set's (cached) view says, else the settings'. Acquire answers it too (`maxCount`).
   */
  async maxCount(request: Pick<PermitRequest, 'limits' | 'setId' | 'class' | 'consumer'>): Promise<number> {
    const base = planFor(request.limits);
    const cls = checkClass(base, request.class);
    const learned = cls !== undefined && base.learned.has(cls);
    const plan = learned ? (await this.#planOf(request.limits, request.setId)).plan : base;
    return largestGrant(plan, cls, reservedConsumer(plan, request.consumer));
  }

  async acquire(request: PermitRequest): Promise<PermitDecision> {
    let planned = await this.#planOf(request.limits, request.setId);
    let outcome = await this.#acquireOn(request, planned, false);
    if (outcome.kind === 'stale-view') {
      // Another process decided grants on a newer learned view: read it, and decide on it. Once: an item some
      // other set's view also writes (a user-scoped budget) may stay ahead of this set's.
      planned = await this.#planOf(request.limits, request.setId, true);
      outcome = await this.#acquireOn(request, planned, true);
    }
    if (outcome.kind !== 'decided') throw new Error('rate ledger: a refreshed learned view cannot be stale');
    return outcome.decision;
  }

  async #acquireOn(
    request: PermitRequest,
    { plan, version, next }: RequestPlan,
    refreshed: boolean,
  ): Promise<Extract<Outcome, { kind: 'decided' | 'stale-view' }>> {
    const { tokenId, count, cls } = checkPermit(request, plan);
    // Only a consumer holding a reservation in this plan is named (in its receipt too).
    const consumer = reservedConsumer(plan, request.consumer);
    // Beyond the smallest limit checkPermit knows, a window with reservations holds less for most consumers.
    const largest = largestGrant(plan, cls, consumer);
    if (count > largest)
      throw new InvalidPermitCountError(`count must be an integer from 1 to ${largest} for this consumer`);
    const input: GrantInput = {
      plan,
      version,
      next,
      learning: plan.learned.size > 0 && request.setId !== undefined,
      refreshed,
      key: tokenId,
      count,
      cls,
      consumer,
      maxCount: largest,
      caller: callerTag(request.caller ?? ''),
      regional: this.#regional,
      spreadMs: Math.min(MAX_HINT_SPREAD_MS, HINT_SPREAD * Math.min(...plan.general.map((r) => r.windowMs))),
      random: this.#random,
    };
    const outcome = await this.#items.apply(tokenId, plan, (state, g, now) =>
      outcomeOf(grant(state, input, { g, now })),
    );
    if (outcome.kind === 'stale-view') return outcome;
    const { decision } = outcome;
    if (!decision.granted && this.#regional) await this.#countAsked(tokenId, count);
    this.#telemetry.debug('rate ledger: permit decision', {
      tokenId,
      count,
      class: cls,
      granted: decision.granted,
      reason: decision.granted ? undefined : decision.reason,
    });
    return outcome;
  }

  /**
   * A regional ledger's denied asks, counted in the item (`dq`) for its lease renewer's demand: grants alone would
   * show a Region held at a share of 0 no demand, and it would never get one. At most one write a second per key
   * and process, carrying what was denied since.
   */
  async #countAsked(tokenId: string, count: number): Promise<void> {
    const { pending, write } = countDenied(
      this.#asked.get(tokenId) ?? NO_PENDING_ASKS,
      count,
      this.#clock.now(),
    );
    this.#asked.set(tokenId, pending);
    if (write !== undefined) await this.#items.countAsked(tokenId, write);
  }

  /**
   * Takes back unused permits of one grant, named by its receipt: at most what it gave, once, for the caller
   * it was issued to. A receipt that cannot be honoured throws ReceiptRejectedError and changes nothing. A
   * give-back the item has no place to record (`notRecorded`, see spentPlaceFor) changes nothing either and is
   * no failure: its permits age out, and nobody else's give-back is kept from being recorded by it.
   */
  async giveBack(request: GiveBackRequest): Promise<GiveBackResult> {
    const { tokenId, count, receipt } = checkGiveBack(request);
    const { plan } = await this.#planOf(request.limits, request.setId);
    const { claims, payload, mac } = receipt;
    const reject = (problem: ReceiptRejectedError['problem'], message: string) =>
      new ReceiptRejectedError(problem, message);
    if (claims.key !== tokenId) throw reject('FOREIGN', 'issued for another token');
    if (claims.caller !== callerTag(request.caller ?? ''))
      throw reject('FOREIGN', 'issued to another caller');
    const input: GiveBackInput = { plan, claims, payload, mac, count, ttlMs: receiptTtlMs(plan) };
    const outcome = await this.#items.apply(tokenId, plan, (state, g, now) =>
      outcomeOf(giveBack(state, input, { g, now })),
    );
    this.#telemetry.debug('rate ledger: give-back', {
      tokenId,
      count,
      class: claims.cls,
      ...(outcome.kind === 'receipt-refused' ? { refused: outcome.problem } : outcome.result),
    });
    if (outcome.kind === 'receipt-refused') throw reject(outcome.problem, outcome.message);
    return outcome.result;
  }

  /** A vendor's answer reported: its caps and cooldown, and what its class's limit teaches (ledger-reports.ts). */
  reportVendorFeedback(report: VendorFeedbackReport): Promise<VendorFeedbackResult | undefined> {
    return reportFeedback(this.#core, report);
  }

  /** A read, no write: what could be granted now, per limit (ledger-reports.ts). */
  remaining(tokenId: string, limits: RateLimitSettings, setId?: string): Promise<WindowRemaining[]> {
    return remainingOf(this.#core, tokenId, limits, setId);
  }

  /** A read, no write: granted and left per limit, and the vendor cooldown (the operator's status). */
  usage(tokenId: string, limits: RateLimitSettings, setId?: string): Promise<LedgerUsage> {
    return usageOf(this.#core, tokenId, limits, setId);
  }

  /** A fresh read moved to the ledger time; DynamoDB failing is the ledger being unavailable. */
  async #readAt(tokenId: string, plan: LimitPlan): Promise<{ state: LedgerState; g: number }> {
    let read: Snapshot;
    try {
      read = await this.#items.read(tokenId);
    } catch (error) {
      throw error instanceof LedgerUnavailableError
        ? error
        : new LedgerUnavailableError('rate ledger unavailable', { cause: error });
    }
    const g = Math.max(this.#time.now([plan]), read.state.time);
    return { state: stateAt(read.state, g, plan.marginMs), g };
  }
}
