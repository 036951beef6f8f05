import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock } from '../../clock.js';
import type { Telemetry } from '../../telemetry.js';
import { LedgerUnavailableError } from '../errors.js';
import type { LedgerClock } from '../ledger-clock.js';
import { type LedgerState, stateAt } from '../ledger-state.js';
import { newSecret, randomChars } from '../receipts.js';
import { type Ring, slotIndex, usedAt } from '../ring.js';
import { allRings, type ItemFormat, type LimitPlan, parseRingKey } from '../ring-plan.js';
import { CARRIED_WRITE_IDS, WRITE_ID_LENGTH, WRITE_IDS_LIMIT } from './item-size.js';
import type { HeadAddition } from './ledger-item.js';
import { LedgerTable, type Snapshot } from './ledger-table.js';

/**
 * What an operation did to the working state it was handed, as it tells the loop: `none` (nothing to write),
 * `grants` (it only added grants to rings at g, this many per ring key: head additions may carry them,
 * grantAdditions below), `other` (anything else: a full write). The loop does not look for changes itself.
 */
export type Change = 'none' | { grants: ReadonlyMap<string, number> } | 'other';

/**
 * One operation on one item, applied to the working state at ledger time g. It is applied again, from scratch,
 * on every attempt (a fresh state after a conflict), so it must depend on nothing but its arguments.
 */
export type ItemOperation<T> = (state: LedgerState, g: number, now: number) => { change: Change; result: T };

interface Queued {
  plan: LimitPlan;
  apply: ItemOperation<unknown>;
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

export interface ItemWriterOptions {
  client: DynamoDBClient;
  tableName: string;
  clock: Clock;
  time: LedgerClock;
  telemetry: Telemetry;
  maxConflictRetries: number;
  jitterMs: number;
  random: () => number;
  cacheFreshMs: number;
  /** The plan an item's share holds grants to at g (region-share.ts), for the head additions' bounds. */
  held(plan: LimitPlan, state: LedgerState, g: number): LimitPlan;
  /** Whether the item's share lapsed at g: it leaves with the next write, a full one. */
  lapsed(state: LedgerState, g: number): boolean;
  /** Draws a candidate write id; default 30 random bits (randomWriteId below). */
  drawWriteId?: (() => string) | undefined;
}

const MAX_CACHED_TOKENS = 1000;

/**
 * The conditional-write loop of the ledger items: each batch of operations on one item is ONE conditional
 * UpdateItem built on what this process learned of the item within `cacheFreshMs` (else on a consistent read),
 * retried on fresh state on conflict; a write id tells an applied write after a lost answer (newWriteId below; item-size.ts WRITE_IDS_LIMIT).
 */
export class ItemWriter {
  readonly #table: LedgerTable;
  readonly #options: ItemWriterOptions;
  readonly #cache = new Map<string, Snapshot>();
  readonly #queue = new BatchQueue<Queued>((key, ops) => this.#runBatch(key, ops));

  constructor(options: ItemWriterOptions) {
    this.#options = options;
    this.#table = new LedgerTable(options.client, options.tableName, options.clock, () =>
      options.time.earliest(),
    );
  }

  /**
   * Applies `operation` to the item of `key` (batched with this process's other operations on it) and writes the
   * result once; resolves with the operation's result of the attempt that was written (or wrote nothing).
   */
  apply<T>(key: string, plan: LimitPlan, operation: ItemOperation<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(key, {
        plan,
        apply: operation,
        resolve: resolve as (result: unknown) => void,
        reject,
      });
    });
  }

  /** A consistent read of the item (no item: the empty state). */
  read(key: string): Promise<Snapshot> {
    return this.#table.read(key);
  }

  /** Counts denied asks on an existing item (`dq`, ADD, outside the loop: ledger-table.ts countAsked). */
  countAsked(key: string, count: number): Promise<void> {
    return this.#table.countAsked(key, count);
  }

  async #runBatch(key: string, ops: Queued[]): Promise<void> {
    try {
      const results = await this.#decide(key, ops);
      ops.forEach((op, index) => {
        op.resolve(results[index]);
      });
    } catch (error) {
      this.#cache.delete(key);
      const failure =
        error instanceof LedgerUnavailableError
          ? error
          : new LedgerUnavailableError('rate ledger unavailable', { cause: error });
      this.#options.telemetry.warn('rate ledger unavailable: no permit', {
        tokenId: key,
        reason: failure.message,
        cause: (failure.cause as Error | undefined)?.name,
      });
      for (const op of ops) op.reject(failure);
    }
  }

  /** Computes the batch on the newest state it can get and writes it once; on conflict, again on fresh state. */
  async #decide(key: string, ops: Queued[]): Promise<unknown[]> {
    const { clock, time, cacheFreshMs } = this.#options;
    const plans = [...new Set(ops.map((op) => op.plan))];
    const marginMs = Math.max(...plans.map((plan) => plan.marginMs));
    const cached = this.#cache.get(key);
    const usable = cached && clock.now() - cached.at <= cacheFreshMs ? cached : undefined;
    let fresh = usable === undefined;
    let snapshot: Snapshot = usable ?? (await this.#table.read(key));
    for (let conflicts = 0; ; ) {
      const read = snapshot.state;
      const now = time.now(plans);
      const g = Math.max(now, read.time);
      const work = stateAt(read, g, marginMs);
      // The first write creates the item's receipt secret; a concurrent creator wins by the condition.
      work.secret ??= newSecret();
      // A lapsed share leaves with this write (a full one): release N-1 would hold the item to its floor.
      const dropsShare = this.#options.lapsed(work, g);
      if (dropsShare) work.share = undefined;
      const outcomes = ops.map((op) => op.apply(work, g, now));
      const results = outcomes.map((outcome) => outcome.result);
      if (outcomes.every((outcome) => outcome.change === 'none')) {
        if (fresh) {
          this.#remember(key, snapshot);
          return results;
        }
        // Nothing to write, but the cached state may be behind a give-back elsewhere: decide on a fresh read.
        snapshot = await this.#table.read(key);
        fresh = true;
        continue;
      }
      const grants = dropsShare ? undefined : grantsOf(outcomes.map((outcome) => outcome.change));
      const written = await this.#write(key, snapshot, work, plans, g, grants);
      if (written.ok) {
        this.#remember(key, written.snapshot);
        return results;
      }
      snapshot = written.current;
      if (++conflicts > this.#options.maxConflictRetries)
        throw new LedgerUnavailableError(`rate ledger busy: ${conflicts} conflicting writes in a row`);
      this.#options.telemetry.debug('rate ledger: write conflict, retrying', { tokenId: key, conflicts });
      await this.#pause(conflicts);
      fresh = true;
    }
  }

  /**
   * Writes `work` (decided on `snapshot` at g) once, with a write id of its own: as head additions where the batch
   * only added grants (`grants`, as its operations told) and the item allows it, else in full. Applied (by this
   * attempt or an earlier one the SDK re-sent: the id in the item says so), or the item as it is now.
   */
  async #write(
    key: string,
    snapshot: Snapshot,
    work: LedgerState,
    plans: readonly LimitPlan[],
    g: number,
    grants: ReadonlyMap<string, number> | undefined,
  ): Promise<{ ok: true; snapshot: Snapshot } | { ok: false; current: Snapshot }> {
    const read = snapshot.state;
    const retainMs = Math.max(...plans.map((plan) => plan.retainMs));
    // Several plans in one batch (a configuration change arriving): the newer format, once any plan asks for it.
    const format = Math.max(...plans.map((plan) => plan.itemFormat)) as ItemFormat;
    // Each attempt is a new write with an id of its own, none of the item's (I2): a full write leaves its own in
    // `w` and carries the ids before it (newest first): an earlier write can still be told after someone else's.
    const writeId = newWriteId((id) => wroteWithId(read, id), this.#options.drawWriteId);
    work.writeIds = new Set([writeId]);
    work.carriedWriteIds = [...read.writeIds, ...read.carriedWriteIds].slice(0, CARRIED_WRITE_IDS);
    // A head addition needs room for its id in the item's set and the item's own format; else a full write
    // (which resets the set), so that no write ever goes without an id.
    const additions =
      grants !== undefined &&
      read.secret !== undefined &&
      read.writeIds.size < WRITE_IDS_LIMIT &&
      snapshot.format === format
        ? grantAdditions(
            read,
            work,
            grants,
            plans.map((plan) => this.#options.held(plan, work, g)),
            g,
          )
        : undefined;
    work.version = read.version + 1;
    let written: Awaited<ReturnType<LedgerTable['writeFull']>>;
    try {
      written = await ((additions && this.#table.addToHeads(key, additions, snapshot, writeId, g)) ??
        this.#table.writeFull(key, work, retainMs, format, snapshot));
    } catch (error) {
      // No answer, even after the SDK's retries: it may have been applied all the same. Only the item knows.
      const current = await this.#table.read(key);
      if (!wroteWithId(current.state, writeId)) throw error;
      return { ok: true, snapshot: current };
    }
    if (written.ok) return written;
    const current = written.current ?? (await this.#table.read(key));
    // The condition failed because an earlier attempt of this very write (re-sent by the SDK) applied.
    return wroteWithId(current.state, writeId) ? { ok: true, snapshot: current } : { ok: false, current };
  }

  #remember(key: string, snapshot: Snapshot): void {
    this.#cache.delete(key);
    this.#cache.set(key, snapshot);
    if (this.#cache.size > MAX_CACHED_TOKENS) {
      const oldest = this.#cache.keys().next();
      if (!oldest.done) this.#cache.delete(oldest.value);
    }
  }

  #pause(conflicts: number): Promise<void> {
    const ms = this.#options.random() * this.#options.jitterMs * 2 ** Math.min(conflicts - 1, 5);
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}

// Write ids (`w`, `wp`): why every write carries one and how many the item keeps, item-size.ts WRITE_IDS_LIMIT.

/** A candidate write id: 30 random bits. */
export const randomWriteId = (): string => randomChars(WRITE_ID_LENGTH);
/**
 * A write id that is none of `present` (the ids of the item the write is planned on, `w` and `wp`): an id already
 * there would make a write that failed its condition read the item, find "its" id and take itself for applied (a
 * grant answered and never counted, issue 34). Same width as before, so release N-1 reads it.
 */
function newWriteId(present: (id: string) => boolean, draw: () => string = randomWriteId): string {
  for (;;) {
    const id = draw();
    if (!present(id)) return id;
  }
}

/** Whether the item (`state`) holds this write id: in its set `w`, or carried by a full write (`wp`). */
const wroteWithId = (state: Pick<LedgerState, 'writeIds' | 'carriedWriteIds'>, writeId: string): boolean =>
  state.writeIds.has(writeId) || state.carriedWriteIds.includes(writeId);

/**
 * Operations on one token from this process run one batch at a time: everything that arrived while the previous
 * batch was being written goes out in the next single conditional write. Concurrent callers of one process so
 * never conflict with each other, and a burst of N acquires costs about one write instead of N.
 */
class BatchQueue<Op> {
  readonly #pending = new Map<string, Op[]>();
  readonly #run: (key: string, ops: Op[]) => Promise<void>;
  readonly #maxBatch: number;

  /** `run` settles every op of its batch itself and must not throw. */
  constructor(run: (key: string, ops: Op[]) => Promise<void>, maxBatch = 64) {
    this.#run = run;
    this.#maxBatch = maxBatch;
  }

  push(key: string, op: Op): void {
    const queue = this.#pending.get(key);
    if (queue) {
      queue.push(op);
      return;
    }
    this.#pending.set(key, [op]);
    void this.#drain(key);
  }

  async #drain(key: string): Promise<void> {
    // Let callers of the same tick join the first batch.
    await Promise.resolve();
    for (;;) {
      const queue = this.#pending.get(key);
      if (!queue || queue.length === 0) {
        this.#pending.delete(key);
        return;
      }
      await this.#run(key, queue.splice(0, this.#maxBatch));
    }
  }
}

/**
 * Fast grants (I6), written by ledger-item.ts headWrite. The cheap path for concurrent grants. When a batch only grants, in the same head slot (of every ring) as the
 * last full write, with no vendor cap in force, its whole effect is "add d to the head slot of these rings".
 * That can be written as an addition guarded per ring by "the head holds at most `max` now", where `max` leaves
 * room for d beside the older slots, plus "no full write happened since" (the item's version). Grants of other
 * processes in the same slot then add up instead of conflicting (DynamoDB ADD commutes: counts add, the
 * sub-slots of the latest grants join a set), and the bound still holds: the older slots cannot change without
 * a new version, and the guard counts every grant already in the head.
 */
const head = (ring: Ring | undefined) => ({ count: ring?.counts[0] ?? 0, sub: ring?.subs[0] ?? -1 });

/** The grants a batch added, per ring key, when every operation of it only added grants (or changed nothing). */
function grantsOf(changes: readonly Change[]): ReadonlyMap<string, number> | undefined {
  const sum = new Map<string, number>();
  for (const change of changes) {
    if (change === 'other') return undefined;
    if (change === 'none') continue;
    for (const [key, k] of change.grants) sum.set(key, (sum.get(key) ?? 0) + k);
  }
  return sum;
}

/**
 * The head additions that write `grants` (added at g to the item read as `read`, by the batch's operations, as
 * they told), or undefined if a full write is needed: the item's last full write was in another slot of a ring,
 * or the item itself asks for one (new, reservations changed within a span). A grant under a vendor cap counts
 * the cap down, so it tells the loop `other` itself (ledger-state.ts acquire). `work` is the batch's working
 * state at g: the head's sub-slot.
 */
export function grantAdditions(
  read: LedgerState,
  work: LedgerState,
  grants: ReadonlyMap<string, number>,
  plans: readonly LimitPlan[],
  g: number,
): HeadAddition[] | undefined {
  if (read.version === 0) return undefined;
  // Every grant while a change of reservations still guards the general rings is written in full.
  const guardMs = Math.max(...plans.map((plan) => plan.retainMs));
  if (g < read.reservationsChangedAt + guardMs) return undefined;
  for (const key of new Set([...read.rings.keys(), ...grants.keys()])) {
    const { slotMs } = parseRingKey(key);
    if (slotIndex(g, slotMs) !== slotIndex(read.time, slotMs)) return undefined;
  }
  const additions: HeadAddition[] = [];
  for (const [key, add] of grants) {
    if (add <= 0) continue;
    const before = read.rings.get(key);
    const olderOnly: Ring = {
      counts: [0, ...(before?.counts ?? []).slice(1)],
      subs: [0, ...(before?.subs ?? []).slice(1)],
    };
    // The general ring of a window with reservations is not a bound (its shared and reservation rings are,
    // each with its own condition): only that it is known; except under a Region's share (region-share.ts).
    const bounds = plans.flatMap((plan) =>
      allRings(plan)
        .filter((spec) => spec.key === key)
        .map((spec) =>
          plan.reserved.has(spec.key) && plan.checkReserved !== true
            ? Number.MAX_SAFE_INTEGER
            : spec.limit - usedAt(spec, olderOnly, g) - add,
        ),
    );
    const max = Math.min(...bounds);
    // A ring no plan of the batch knows cannot have grown; and a grant that fit leaves max ≥ head before.
    if (!Number.isFinite(max) || max < head(before).count) return undefined;
    additions.push({ key, add, max, sub: head(work.rings.get(key)).sub });
  }
  return additions.length > 0 ? additions : undefined;
}
