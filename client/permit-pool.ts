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
 * The local permits of one (credential set, token, class), and how big the next batch should be. Sizes: start
 * at 1; double (up to the maximum) when the last batch ran out while it would still have been usable (demand
 * outruns the batch); halve when permits lapsed unused or the ledger denied; never ask for more than the
 * ledger last said remains (a larger ask is denied whole, while a smaller one might be granted).
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
    if (batch.left === 0) {
      this.#remove(batch);
      this.#exhaustedUsableUntil = batch.usableUntil;
    }
    return { batch, lapsed };
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

  /** How many to ask for now. */
  nextCount(now: number): number {
    if (this.#exhaustedUsableUntil !== undefined && this.#exhaustedUsableUntil > now) {
      this.#size = Math.min(this.#maxSize, this.#size * 2);
    }
    this.#exhaustedUsableUntil = undefined;
    const remaining = applicableRemaining(this.windows, this.cls);
    return Math.max(1, Math.min(this.#size, remaining ?? this.#size));
  }

  add(batch: Batch, windows: readonly QuotaWindow[]): void {
    this.batches.push(batch);
    this.windows = windows;
    this.notify();
  }

  denied(until: number, windows: readonly QuotaWindow[] | undefined): void {
    this.deniedUntil = Math.max(this.deniedUntil, until);
    if (windows) this.windows = windows;
    this.#shrink();
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
