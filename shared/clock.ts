/**
 * Time is injected everywhere: token lifetimes are hours and quotas are per hour, so tests drive a
 * clock instead of sleeping. `now()` is Unix epoch milliseconds.
 */
export interface Clock {
  now(): number;
  /** Resolves after `ms` of this clock's time; rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/**
 * What an HTTP `Date` header says of the other side's clock minus ours (ms): the answer was stamped in the whole
 * second of `date` (the header truncates; `lateMs` more where the server caches it per second) between our
 * `sentAt` and `receivedAt`, so the difference lies in [second - receivedAt, second + 1000 + lateMs - sentAt].
 */
export function dateHeaderOffset(
  date: number,
  sentAt: number,
  receivedAt: number,
  lateMs = 0,
): { lo: number; hi: number } {
  const second = Math.floor(date / 1000) * 1000;
  return { lo: second - receivedAt, hi: second + 1000 + lateMs - sentAt };
}

interface Sleeper {
  at: number;
  seq: number;
  resolve: () => void;
}

/**
 * A clock that only moves when told to. `advance` wakes sleepers in time order.
 * With `autoAdvance`, `sleep` moves the clock itself (handy for a single caller's retry loop).
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #sleepers: Sleeper[] = [];
  readonly #autoAdvance: boolean;

  constructor(startMs: number = Date.UTC(2026, 0, 5, 9, 0, 0), options: { autoAdvance?: boolean } = {}) {
    this.#now = startMs;
    this.#autoAdvance = options.autoAdvance ?? false;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#autoAdvance) {
      this.#now += Math.max(0, ms);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const sleeper: Sleeper = { at: this.#now + Math.max(0, ms), seq: this.#seq++, resolve };
      this.#sleepers.push(sleeper);
      signal?.addEventListener(
        'abort',
        () => {
          this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** Moves the clock forward, waking every sleeper whose time has come, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      this.#sleepers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.#sleepers[0];
      if (!next || next.at > target) break;
      this.#sleepers.shift();
      this.#now = Math.max(this.#now, next.at);
      next.resolve();
      // Let the woken task run up to its next await before waking the next one.
      await new Promise<void>((r) => setImmediate(r));
    }
    this.#now = target;
  }

  set(ms: number): void {
    this.#now = ms;
  }

  get pendingSleepers(): number {
    return this.#sleepers.length;
  }
}
