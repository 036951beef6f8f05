import { type Clock, dateHeaderOffset } from '../clock.js';
import { Metric } from '../metric-names.js';
import type { Telemetry } from '../telemetry.js';
import { LedgerClockSkewError } from './errors.js';
import type { LimitPlan } from './ring-plan.js';

/**
 * The ledger's time, on a clock every process shares. Each process records grants at its own ledger time, and
 * the rings hold the bound only while those times agree: a process whose clock runs ahead moves the item's time
 * ahead and the rings forget the real grants behind it; one behind records its grants too early, and they leave
 * the span too soon. So each process compares its clock with DynamoDB's (the `Date` of every answer, which the
 * SDK itself reads for its signing-clock correction) and corrects it; beyond MAX_LEDGER_CLOCK_SKEW_MS it grants
 * nothing.
 */

/** A process whose clock is further than this from DynamoDB's is refused (LedgerClockSkewError, counted). */
export const MAX_LEDGER_CLOCK_SKEW_MS = 10 * 60_000;
/**
 * A corrected clock is used only once DynamoDB's is known to within this share of the smallest slack of the
 * plans in use (margin less permit validity: 100 ms of the default 1 s), since any error of a process's ledger
 * time comes out of that slack.
 */
export const CORRECTION_SHARE_OF_SLACK = 0.1;
/**
 * How late a `Date` may be: servers format it from a per-second cache that a timer refreshes (Node's http does,
 * as dynalite serves it), so just after a tick a busy server may still send the second before.
 */
export const DATE_LAG_MS = 25;
/** Samples kept: enough to narrow the estimate to a few ms; old ones go, as clocks drift. */
const MAX_SAMPLES = 512;
const MAX_SAMPLE_AGE_MS = 30 * 60_000;

/** DynamoDB's clock minus ours (ms): somewhere in [lo, hi]. */
export interface OffsetInterval {
  lo: number;
  hi: number;
}

interface Sample extends OffsetInterval {
  at: number;
}

/**
 * What the answers said of the reference's clock, NTP-like. An answer sent at our `sentAt` and received at
 * our `receivedAt` was stamped between the two, in the reference's whole second `second` (a `Date` header
 * truncates, and may be up to DATE_LAG_MS late): reference - ours lies in
 * [second - receivedAt, second + 1000 + DATE_LAG_MS - sentAt]. The intersection over the samples narrows to
 * about a round trip plus DATE_LAG_MS once answers fall on both sides of a second's tick. A sample that
 * contradicts the older ones (one of the clocks was stepped) starts the estimate again from the newest.
 */
export class ClockReference {
  /** The samples kept, from `#first` on, oldest first (what is before `#first` waits to be cut off). */
  #samples: Sample[] = [];
  #first = 0;
  /**
   * Indices of kept samples, from their heads on: `lo` decreasing and `hi` increasing, so the head of each is the
   * largest `lo` and the smallest `hi` of the samples kept (monotone queues: the oldest leave in O(1)).
   */
  #los: number[] = [];
  #losHead = 0;
  #his: number[] = [];
  #hisHead = 0;
  /** Whether the kept samples came back in the order of our clock (it was not stepped back among them). */
  #ordered = true;
  #offset: OffsetInterval | undefined;

  record(sentAt: number, receivedAt: number, second: number): void {
    if (!Number.isFinite(sentAt) || !Number.isFinite(receivedAt) || !Number.isFinite(second)) return;
    if (receivedAt < sentAt) return;
    const sample = { ...dateHeaderOffset(second, sentAt, receivedAt, DATE_LAG_MS), at: receivedAt };
    const known = this.#offset;
    const newest = this.#samples.length > this.#first ? this.#samples.at(-1) : undefined;
    // The usual answer agrees with every sample kept (it meets their intersection): the walk below would keep them
    // all but the too many and the too old, oldest first, so their intersection is found from the queues without
    // it (the walk is a pass over up to MAX_SAMPLES, on every DynamoDB answer).
    if (
      known &&
      newest &&
      this.#ordered &&
      receivedAt >= newest.at &&
      sample.lo <= known.hi &&
      sample.hi >= known.lo
    ) {
      this.#append(sample);
      while (
        this.#samples.length - this.#first > MAX_SAMPLES ||
        receivedAt - (this.#samples[this.#first] as Sample).at > MAX_SAMPLE_AGE_MS
      )
        this.#first++;
      while ((this.#los[this.#losHead] as number) < this.#first) this.#losHead++;
      while ((this.#his[this.#hisHead] as number) < this.#first) this.#hisHead++;
      this.#offset = {
        lo: (this.#samples[this.#los[this.#losHead] as number] as Sample).lo,
        hi: (this.#samples[this.#his[this.#hisHead] as number] as Sample).hi,
      };
      if (this.#first > 4 * MAX_SAMPLES) this.#keep(this.#samples.slice(this.#first));
      return;
    }
    // From the newest back: the samples that agree with all newer ones, within MAX_SAMPLES and MAX_SAMPLE_AGE_MS.
    const all = [...this.#samples.slice(this.#first), sample];
    let lo = Number.NEGATIVE_INFINITY;
    let hi = Number.POSITIVE_INFINITY;
    let kept = 0;
    for (let i = all.length - 1; i >= 0; i--) {
      const older = all[i] as Sample;
      if (kept === MAX_SAMPLES || receivedAt - older.at > MAX_SAMPLE_AGE_MS) break;
      if (older.lo > hi || older.hi < lo) break;
      lo = Math.max(lo, older.lo);
      hi = Math.min(hi, older.hi);
      kept++;
    }
    this.#keep(all.slice(all.length - kept));
    this.#offset = { lo, hi };
  }

  /** Undefined before the first answer. */
  offset(): OffsetInterval | undefined {
    return this.#offset && { ...this.#offset };
  }

  #append(sample: Sample): void {
    const index = this.#samples.push(sample) - 1;
    while (
      this.#los.length > this.#losHead &&
      (this.#samples[this.#los.at(-1) as number] as Sample).lo <= sample.lo
    )
      this.#los.pop();
    this.#los.push(index);
    while (
      this.#his.length > this.#hisHead &&
      (this.#samples[this.#his.at(-1) as number] as Sample).hi >= sample.hi
    )
      this.#his.pop();
    this.#his.push(index);
  }

  /** Keeps these samples (oldest first) and no other. */
  #keep(samples: Sample[]): void {
    this.#samples = [];
    this.#first = 0;
    this.#los = [];
    this.#losHead = 0;
    this.#his = [];
    this.#hisHead = 0;
    this.#ordered = samples.every((sample, i) => i === 0 || sample.at >= (samples[i - 1] as Sample).at);
    for (const sample of samples) this.#append(sample);
  }
}

/** LedgerClock.check: ledger time and how sure it is, or why there is none (`refused`: beyond the skew accepted). */
export type LedgerTimeCheck =
  | { ok: true; at: number; correction: number; uncertaintyMs: number }
  | { ok: false; refused: boolean; offsetMs: number | undefined; toleranceMs?: number };

export interface LedgerClockOptions {
  /** The process's own clock. */
  local: Clock;
  /** Undefined: the local clock is the ledger's (tests with a simulated clock, tools). */
  reference: ClockReference | undefined;
  telemetry: Telemetry;
}

/**
 * The ledger time of this process: its own clock while DynamoDB's answers agree with it (a clock kept by NTP,
 * as in Lambda: exactly what it was before), else corrected by the smallest offset they allow, which is within
 * the estimate's width of the truth. Neither side of the estimate is free: a ledger time late by e keeps grants
 * counted e longer but checks the rings e late (other processes follow the item's time), an early one records
 * grants e early; either way e comes out of the margin's slack (limit-plan.ts, MIN_SLACK_FRACTION). So a
 * corrected clock is used only once the estimate is narrower than CORRECTION_SHARE_OF_SLACK of the slack; until
 * then (its first few dozen DynamoDB answers) the process fails closed.
 */
export class LedgerClock {
  readonly #local: Clock;
  readonly #reference: ClockReference | undefined;
  readonly #telemetry: Telemetry;
  #corrected = false;

  constructor(options: LedgerClockOptions) {
    this.#local = options.local;
    this.#reference = options.reference;
    this.#telemetry = options.telemetry;
  }

  /**
   * Ledger time for a decision under these plans now, or why there is none: what `now` decides, without the error,
   * the log or the metric. Ledger time is within `uncertaintyMs` of DynamoDB's clock (0 without a reference: the
   * process's clock is the ledger's). For a process that decides with ledger time beside its ledger and holds it
   * to a bound of its own (the lease renewer: shared/regions/renewer-clock.ts).
   */
  check(plans: readonly LimitPlan[]): LedgerTimeCheck {
    const local = this.#local.now();
    if (this.#reference === undefined) return { ok: true, at: local, correction: 0, uncertaintyMs: 0 };
    const offset = this.#reference.offset();
    if (offset === undefined) return { ok: false, refused: false, offsetMs: undefined };
    const correction = Math.min(Math.max(0, offset.lo), offset.hi);
    if (Math.abs(correction) > MAX_LEDGER_CLOCK_SKEW_MS)
      return { ok: false, refused: true, offsetMs: correction };
    const uncertaintyMs = offset.hi - offset.lo;
    if (correction !== 0) {
      const toleranceMs =
        CORRECTION_SHARE_OF_SLACK * Math.min(...plans.map((plan) => plan.marginMs - plan.validityMs));
      if (uncertaintyMs > toleranceMs)
        return { ok: false, refused: false, offsetMs: correction, toleranceMs };
    }
    return { ok: true, at: local + correction, correction, uncertaintyMs };
  }

  /** Ledger time for a decision under these plans; throws LedgerClockSkewError where there is none to give. */
  now(plans: readonly LimitPlan[]): number {
    const check = this.check(plans);
    if (check.ok) {
      if (check.correction !== 0 && !this.#corrected) {
        this.#corrected = true;
        this.#telemetry.warn("rate ledger: this process's clock is off DynamoDB's; ledger time corrected", {
          offsetMs: check.correction,
          uncertaintyMs: check.uncertaintyMs,
        });
      }
      return check.at;
    }
    const { offsetMs, refused, toleranceMs } = check;
    if (offsetMs === undefined)
      throw new LedgerClockSkewError(
        "rate ledger unavailable: this process has not yet compared its clock with DynamoDB's",
        { offsetMs: undefined, refused: false },
      );
    if (refused) {
      this.#telemetry.metric(Metric.LedgerClockSkewRefused, 'Count', 1);
      this.#telemetry.error("rate ledger: this process's clock is too far from DynamoDB's; no permit", {
        offsetMs,
        maxOffsetMs: MAX_LEDGER_CLOCK_SKEW_MS,
      });
      throw new LedgerClockSkewError(
        `rate ledger unavailable: this process's clock is ${describe(offsetMs)} DynamoDB's (at most ${
          MAX_LEDGER_CLOCK_SKEW_MS / 1000
        } s accepted); fix its time synchronisation`,
        { offsetMs, refused: true },
      );
    }
    throw new LedgerClockSkewError(
      `rate ledger unavailable: this process's clock is ${describe(offsetMs)} DynamoDB's, not yet measured to within ${toleranceMs} ms`,
      { offsetMs, refused: false },
    );
  }

  /**
   * The earliest DynamoDB's clock can read now, as far as known (the local clock without a reference): what an
   * item's purge time is compared with. Never throws; the decision that follows does, where it must.
   */
  earliest(): number {
    const local = this.#local.now();
    const offset = this.#reference?.offset();
    return offset === undefined ? local : local + offset.lo;
  }
}

/** "2.5 s ahead of" / "659.9 s behind" (to a tenth of a second), from DynamoDB's clock minus ours. */
const describe = (correctionMs: number): string =>
  `${Math.round(Math.abs(correctionMs) / 100) / 10} s ${correctionMs < 0 ? 'ahead of' : 'behind'}`;
