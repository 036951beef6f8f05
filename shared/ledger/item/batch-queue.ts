/**
 * Operations on one token from this process run one batch at a time: everything that arrived while the previous
 * batch was being written goes out in the next single conditional write. Concurrent callers of one process so
 * never conflict with each other, and a burst of N acquires costs about one write instead of N.
 */
export class BatchQueue<Op> {
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
