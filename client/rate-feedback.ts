import type { Telemetry } from '../shared/telemetry.js';
import type { RateLimitHeaders } from '../shared/vendor-client/types.js';
import type { BrokerApi } from './broker-api.js';
import type { Permits } from './permits.js';
import type { QuotaWindow } from './types.js';

/** The broker accepts at most a day of Retry-After, and counts from 1 up to a million. */
const MAX_RETRY_AFTER_SECONDS = 86_400;
const MAX_COUNT = 1_000_000;
/** Remembered (token, limit, reset) reports, so one window is reported only when it gets worse. */
const REMEMBERED_REPORTS = 256;

/** What the vendor said of one window (X-RateLimit-Limit / -Remaining / -Reset). */
export interface RateWindow {
  limit?: number | undefined;
  remaining?: number | undefined;
  /** Unix seconds. */
  reset?: number | undefined;
}

type Report = {
  tokenId: string;
  /** The answer was of this class (its request took a permit of it): the headers and 429 are the class's. */
  class?: string;
  retryAfterSeconds?: number;
  limit?: number;
  remaining?: number;
  reset?: number;
};

const count = (value: number | undefined, min: number): number | undefined =>
  value !== undefined && Number.isInteger(value) && value >= min && value <= MAX_COUNT ? value : undefined;

/**
 * Tells the broker what the vendor said about its quota: every 429 (a cooldown for all consumers of the token, as
 * far as the report warrants: the broker holds everyone at most a minute on one caller's Retry-After unless the
 * headers sent with it show a general limit at 0, so they go with it; this process itself waits the whole
 * Retry-After, vendor-call.ts),
 * and X-RateLimit-* headers of a success when they show fewer requests left than the ledger believed (the ledger
 * is off: someone else uses the token, or the vendor counts differently). The broker can only become more
 * careful from either. Reports are best effort: a failed report never fails the caller's request.
 *
 * Answers of a request class (`reportClass`: the broker takes `class` in reports) are reported with their class,
 * 429s too; and a class answer's headers are reported whenever the ledger's last word for that class has no
 * window with their X-RateLimit-Limit: a limit the broker does not know yet (it learns the class's limits from
 * them), at most once per (token, class, limit, reset), so once per vendor window. A learned class's answers
 * (`learned`, from the token answer) are reported once per (token, class, limit, reset) even when the ledger
 * knows the limit: one caller's word holds only while it keeps reporting (docs/class-limits.md, "Trust"), and
 * the vendor's headers name one window at a time, so every report renews every limit of the class it taught.
 */
export class RateFeedback {
  readonly #api: BrokerApi;
  readonly #telemetry: Telemetry;
  readonly #reported = new Map<string, number>();
  readonly #pending = new Set<Promise<boolean>>();

  constructor(options: { api: BrokerApi; telemetry: Telemetry }) {
    this.#api = options.api;
    this.#telemetry = options.telemetry;
  }

  /** Awaited: the cooldown should be in the ledger before anyone asks for the next permit. True: the broker has it. */
  async vendorRateLimited(
    setId: string,
    tokenId: string,
    retryAfterSeconds: number,
    window: RateWindow,
    reportClass?: string,
  ): Promise<boolean> {
    const report: Report = {
      tokenId,
      ...(reportClass === undefined ? {} : { class: reportClass }),
      retryAfterSeconds: Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, retryAfterSeconds)),
      // A 429 without X-RateLimit-Remaining still says nothing is left in its window.
      ...this.#window(window.limit, window.remaining ?? 0, window.reset),
    };
    return this.#send(setId, report, 'vendor 429 reported');
  }

  /**
   * After a 2xx: report the vendor's headers when they show less room than the ledger's last word. Returns the
   * report on its way (true: the broker has it), undefined when there is nothing to report.
   */
  afterSuccess(
    setId: string,
    tokenId: string,
    headers: RateLimitHeaders,
    known: readonly QuotaWindow[] | undefined,
    cls: string | undefined,
    reportClass?: string,
    learned = false,
  ): Promise<boolean> | undefined {
    const { remaining, reset } = headers;
    if (remaining === undefined || reset === undefined || !known) return;
    if (reportClass !== undefined && headers.limit !== undefined) {
      return this.#afterClassAnswer(
        setId,
        tokenId,
        { limit: headers.limit, remaining, reset },
        known,
        reportClass,
        learned,
      );
    }
    const applicable = known.filter((w) => w.class === undefined || w.class === cls);
    const window =
      applicable.find((w) => w.limit === headers.limit && w.class === undefined) ??
      applicable.find((w) => w.limit === headers.limit) ??
      (headers.limit === undefined
        ? applicable.reduce<QuotaWindow | undefined>(
            (a, w) => (a && a.remaining <= w.remaining ? a : w),
            undefined,
          )
        : undefined);
    if (!window || remaining >= window.remaining) return;
    const key = `${setId}\u0000${tokenId}\u0000${headers.limit ?? window.limit}\u0000${reset}`;
    const before = this.#reported.get(key);
    if (before !== undefined && before <= remaining) return;
    this.#remember(key, remaining);
    const report: Report = { tokenId, ...this.#window(headers.limit ?? window.limit, remaining, reset) };
    return this.#sendInBackground(setId, report, 'vendor rate headers reported: the ledger is off', {
      ledgerRemaining: window.remaining,
    });
  }

  /**
   * A class answer's headers are the class's (the vendor sends a family's own X-RateLimit-* on its answers):
   * compared with the class's window of that limit, or, where the ledger has none, reported for learning.
   */
  #afterClassAnswer(
    setId: string,
    tokenId: string,
    headers: { limit: number; remaining: number; reset: number },
    known: readonly QuotaWindow[],
    cls: string,
    learned: boolean,
  ): Promise<boolean> | undefined {
    const { limit, remaining, reset } = headers;
    const window = known.find((w) => w.class === cls && w.limit === limit);
    const key = `${setId}\u0000${tokenId}\u0000${cls}\u0000${limit}\u0000${reset}`;
    const before = this.#reported.get(key);
    // A learned limit the ledger knows, this vendor window not reported yet: a renewal.
    const renewal = window !== undefined && learned && before === undefined;
    if (window && !renewal) {
      if (remaining >= window.remaining || (before !== undefined && before <= remaining)) return;
    } else if (before !== undefined) {
      // Learning: one report per vendor window tells the limit and the window; the next ones tell nothing new.
      return;
    }
    this.#remember(key, remaining);
    const report: Report = { tokenId, class: cls, ...this.#window(limit, remaining, reset) };
    if (window && remaining >= window.remaining) {
      // Routine (once per vendor window and process): said at info, not as a warning.
      return this.#sendInBackground(
        setId,
        report,
        'vendor rate headers of a learned class reported: renewing its limits',
        { ledgerRemaining: window.remaining },
        'info',
      );
    }
    return this.#sendInBackground(
      setId,
      report,
      window
        ? 'vendor rate headers of a class reported: the ledger is off'
        : 'vendor rate headers of a class reported: a limit the ledger does not know',
      window ? { ledgerRemaining: window.remaining } : {},
    );
  }

  #sendInBackground(
    setId: string,
    report: Report,
    message: string,
    extra: Record<string, unknown>,
    level: 'warn' | 'info' = 'warn',
  ): Promise<boolean> {
    const done = this.#send(setId, report, message, extra, level).finally(() => this.#pending.delete(done));
    this.#pending.add(done);
    return done;
  }

  /** Waits for reports still on their way (close). */
  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #window(limit: number | undefined, remaining: number, reset: number | undefined): Omit<Report, 'tokenId'> {
    const validLimit = count(limit, 1);
    const validRemaining = count(remaining, 0);
    const validReset =
      reset !== undefined && Number.isInteger(reset) && reset >= 0 && reset <= 99_999_999_999
        ? reset
        : undefined;
    // The broker takes `remaining` only with the time it holds until.
    return {
      ...(validLimit === undefined ? {} : { limit: validLimit }),
      ...(validRemaining === undefined || validReset === undefined
        ? {}
        : { remaining: validRemaining, reset: validReset }),
    };
  }

  async #send(
    setId: string,
    report: Report,
    message: string,
    extra: Record<string, unknown> = {},
    level: 'warn' | 'info' = 'warn',
  ): Promise<boolean> {
    if (report.retryAfterSeconds === undefined && report.remaining === undefined) return false;
    try {
      await this.#api.reportRateLimit(setId, report);
      this.#telemetry[level](message, { credentialSet: setId, ...report, ...extra });
      return true;
    } catch (error) {
      this.#telemetry.warn('rate-limit report failed', {
        credentialSet: setId,
        tokenId: report.tokenId,
        errorCode: (error as { code?: unknown })?.code ?? 'UNKNOWN',
      });
      return false;
    }
  }

  #remember(key: string, remaining: number): void {
    this.#reported.set(key, remaining);
    if (this.#reported.size > REMEMBERED_REPORTS) {
      const oldest = this.#reported.keys().next().value;
      if (oldest !== undefined) this.#reported.delete(oldest);
    }
  }
}

/**
 * A vendor 429 for the token, met by vendorCall or by a service's own call (BrokerClient.reportRateLimit): the
 * permits in hand go back at once and none is asked for before Retry-After; the broker is told (awaited: the
 * cooldown should be in the ledger before anyone asks for the next permit); permits that landed meanwhile go
 * back too. True when the broker has the report.
 */
export async function afterVendorRateLimit(
  deps: { permits: Pick<Permits, 'vendorRateLimited'>; feedback: RateFeedback },
  setId: string,
  tokenId: string,
  retryAfterSeconds: number,
  window: RateWindow,
  reportClass?: string,
): Promise<boolean> {
  deps.permits.vendorRateLimited(setId, tokenId, retryAfterSeconds * 1000);
  const reported = await deps.feedback.vendorRateLimited(
    setId,
    tokenId,
    retryAfterSeconds,
    window,
    reportClass,
  );
  deps.permits.vendorRateLimited(setId, tokenId, retryAfterSeconds * 1000);
  return reported;
}
