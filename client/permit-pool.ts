import type { PermitPriority, QuotaWindow } from './types.js';

/** A promise and its resolve (Promise.withResolvers, which Node 20 lacks). */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** One caller waiting in a pool, from the moment it asks until it has a permit or gives up. */
export interface Ticket {
  readonly priority: PermitPriority;
}

/** One grant of the ledger: `left` permits still unused, handed out only before `usableUntil`. */
export interface Batch {
  grantedAt: number;
  validUntil: number;
  /** Presented to give the unused permits back. */
  receipt: string;
  /** On this client's clock: when it was asked for + the grant's validity − the safety margin. */
  usableUntil: number;
  left: number;
  /** Stops the lapse timer once the batch is used up or given back. */
  timer: AbortController;
  /** On this client's clock: when it was asked for + the grant's validity (no permit of it is sent after). */
  endsAt: number;
  /** Handed out to callers and not yet settled by them (used, or given back: PermitHandle). */
  out: number;
  /** Given back by their holders once the batch had left the pool: they go back with its one give-back. */
  returned: number;
  /** Its receipt was presented, or the client closed: nothing more goes back with it. */
  spent: boolean;
  /** Out of the pool with permits still held: stops the wait for the validity's end once it is given back. */
  ending?: AbortController;
}

/** Applies to a permit of `cls`: the general windows and that class's. */
export function applicableRemaining(
  windows: readonly QuotaWindow[] | undefined,
  cls: string | undefined,
): number | undefined {
  const applicable = (windows ?? []).filter((w) => w.class === undefined || w.class === cls);
  return applicable.length === 0 ? undefined : Math.min(...applicable.map((w) => w.remaining));
}

/**
 * What a broker answer (a grant, a denial) said of the room for this caller's next grant. Older brokers send
 * only `windows`; newer ones also `available` and `maxCount`, which count the caller's reservation and the
 * shared part of windows with reservations (a caller without one may get far less than `windows` remain).
 */
export interface GrantRoom {
  windows: readonly QuotaWindow[] | undefined;
  /** The most one grant could give this caller now (as sent: taken only if a whole number ≥ 0). */
  available?: unknown;
  /** The most one grant can ever give this caller, a larger count being refused with 400 (taken if ≥ 1). */
  maxCount?: unknown;
}

const wholeAtLeast = (value: unknown, least: number): number | undefined =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= least ? value : undefined;

/**
 * The local permits of one (credential set, token, class), and how big the next batch should be. Sizes: start
 * at 1; double (up to the maximum) when the last batch ran out while it would still have been usable (demand
 * outruns the batch); halve when permits lapsed unused or the ledger denied; never ask for more than the
 * ledger last said this caller could have (a larger ask is denied whole, while a smaller one might be granted),
 * nor more than one grant can ever give it (its reservation plus the shared part: a larger ask is a 400).
 */
export class PermitPool {
  readonly setId: string;
  readonly tokenId: string;
  readonly cls: string | undefined;
  readonly batches: Batch[] = [];
  /** The grant in flight, shared by every waiter of this pool. */
  granting: Promise<void> | undefined;
  /** No new grant is asked before this (clock ms): the ledger said so. */
  deniedUntil = 0;
  /** The quota windows the ledger last reported for this token (after a grant or a denial). */
  windows: readonly QuotaWindow[] | undefined;
  /** The most the ledger last said one grant could give this caller now (from brokers that say so). */
  #available: number | undefined;
  /** The most one grant can ever give this caller: as the broker said, or learnt from a 400 that did not say. */
  #maxCount: number | undefined;
  #size = 1;
  readonly #maxSize: number;
  /** The callers asking for a permit of this pool, FIFO per priority: every interactive one comes first. */
  readonly #interactive: Ticket[] = [];
  readonly #batch: Ticket[] = [];
  #changed = signal();
  /** The usable end of the last batch that was used up; set until the next grant decides on growth. */
  #exhaustedUsableUntil: number | undefined;

  constructor(setId: string, tokenId: string, cls: string | undefined, maxSize: number) {
    this.setId = setId;
    this.tokenId = tokenId;
    this.cls = cls;
    this.#maxSize = maxSize;
  }

  get size(): number {
    return this.#size;
  }

  /** A caller starts waiting: behind every earlier caller of its priority (and, for batch, every interactive one). */
  enqueue(priority: PermitPriority): Ticket {
    const ticket: Ticket = { priority };
    (priority === 'batch' ? this.#batch : this.#interactive).push(ticket);
    return ticket;
  }

  /** The caller has its permit or gave up (abort, deadline, close): the next one may take. */
  leave(ticket: Ticket): void {
    const queue = ticket.priority === 'batch' ? this.#batch : this.#interactive;
    const index = queue.indexOf(ticket);
    if (index >= 0) queue.splice(index, 1);
    this.notify();
  }

  /** Whether the ticket is the one to be served next: the oldest interactive one, else the oldest batch one. */
  isTurn(ticket: Ticket): boolean {
    return (this.#interactive[0] ?? this.#batch[0]) === ticket;
  }

  /** How many callers are served before this one (0 for the one whose turn it is). */
  ahead(ticket: Ticket): number {
    return ticket.priority === 'batch'
      ? this.#interactive.length + this.#batch.indexOf(ticket)
      : this.#interactive.indexOf(ticket);
  }

  /** How many callers wait, per priority. */
  get waiting(): { interactive: number; batch: number } {
    return { interactive: this.#interactive.length, batch: this.#batch.length };
  }

  /** Settles when the queue or the permits in hand change (a caller left, a grant landed). */
  get changed(): Promise<void> {
    return this.#changed.promise;
  }

  notify(): void {
    const changed = this.#changed;
    this.#changed = signal();
    changed.resolve();
  }

  /** Permits in hand (not yet lapsed: call removeLapsed first). */
  get available(): number {
    return this.batches.reduce((sum, b) => sum + b.left, 0);
  }

  /** Takes one permit from the oldest usable batch; lapsed batches are removed and returned to the caller. */
  take(now: number): { batch: Batch | undefined; lapsed: Batch[] } {
    const lapsed = this.removeLapsed(now);
    const batch = this.batches.find((b) => b.left > 0);
    if (!batch) return { batch: undefined, lapsed };
    batch.left--;
    batch.out++;
    if (batch.left === 0) {
      this.#remove(batch);
      this.#exhaustedUsableUntil = batch.usableUntil;
    }
    return { batch, lapsed };
  }

  /**
   * A permit handed out comes back before it was sent: into its batch again for this client's next caller,
   * while the batch is in the pool and usable. False when it is not (used up, lapsed, drained).
   */
  putBack(batch: Batch, now: number): boolean {
    if (!this.batches.includes(batch) || batch.usableUntil <= now) return false;
    batch.left++;
    this.notify();
    return true;
  }

  /** Batches whose usable time is over: out of the pool, to be given back; a sign the batches are too big. */
  removeLapsed(now: number): Batch[] {
    const lapsed = this.batches.filter((b) => b.usableUntil <= now);
    for (const batch of lapsed) {
      this.#remove(batch);
      if (batch.left > 0) this.#shrink();
    }
    return lapsed;
  }

  /** Everything left, out of the pool (token changed, vendor 429, close). */
  drain(): Batch[] {
    const all = [...this.batches];
    for (const batch of all) this.#remove(batch);
    if (all.length > 0) this.notify();
    return all;
  }

  /** The largest batch this pool grows to: the configured maximum, or less when no grant can be larger. */
  get #ceiling(): number {
    return Math.min(this.#maxSize, this.#maxCount ?? this.#maxSize);
  }

  /** How many to ask for now. */
  nextCount(now: number): number {
    if (this.#exhaustedUsableUntil !== undefined && this.#exhaustedUsableUntil > now) {
      this.#size = Math.min(this.#ceiling, this.#size * 2);
    }
    this.#exhaustedUsableUntil = undefined;
    return Math.max(1, Math.min(this.#size, this.room ?? this.#size));
  }

  /** The most the last answer said a grant could give now (undefined: it did not say). */
  get room(): number | undefined {
    const remaining = applicableRemaining(this.windows, this.cls);
    if (remaining === undefined && this.#available === undefined) return undefined;
    return Math.min(remaining ?? Number.POSITIVE_INFINITY, this.#available ?? Number.POSITIVE_INFINITY);
  }

  add(batch: Batch, room: GrantRoom): void {
    this.batches.push(batch);
    this.heard(room);
    this.notify();
  }

  /** The ledger denied (or the vendor said 429): no grant asked before `until`, and a smaller batch. */
  denied(until: number): void {
    this.deniedUntil = Math.max(this.deniedUntil, until);
    this.#shrink();
  }

  /**
   * The broker refused `count` as more than one grant can ever give this caller (400): the batch shrinks to what
   * the answer says is the most (`maxCount`), or, from a broker that does not say, to half the refused count, and
   * never grows past that again. Returns the count to ask for instead.
   */
  tooLarge(count: number, maxCount: unknown): number {
    const said = wholeAtLeast(maxCount, 1);
    this.#maxCount = said !== undefined && said < count ? said : Math.max(1, Math.floor(count / 2));
    this.#size = Math.min(this.#size, this.#maxCount);
    return Math.max(1, Math.min(this.#maxCount, this.room ?? this.#maxCount));
  }

  /** What an answer said of the room for this caller's grants (see GrantRoom). */
  heard(room: GrantRoom): void {
    if (room.windows) this.windows = room.windows;
    // Each answer's `available` replaces the last one's: it is about now.
    this.#available = wholeAtLeast(room.available, 0);
    const maxCount = wholeAtLeast(room.maxCount, 1);
    if (maxCount !== undefined) {
      // The broker's word, also when it says more than a 400 taught (the configuration changed).
      this.#maxCount = maxCount;
      this.#size = Math.min(this.#size, this.#ceiling);
    }
  }

  get idle(): boolean {
    return (
      this.batches.length === 0 &&
      this.granting === undefined &&
      this.#interactive.length === 0 &&
      this.#batch.length === 0
    );
  }

  #shrink(): void {
    this.#size = Math.max(1, Math.floor(this.#size / 2));
  }

  #remove(batch: Batch): void {
    const index = this.batches.indexOf(batch);
    if (index >= 0) this.batches.splice(index, 1);
    batch.timer.abort();
  }
}
