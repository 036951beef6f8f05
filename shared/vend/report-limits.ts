import { createHash } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import * as z from 'zod';
import { type ItemKey, reloginKey, reportCountKey } from '../aws/keys.js';
import { TTL_ATTRIBUTE } from '../aws/tables.js';
import type { Clock } from '../clock.js';
import type { RateLimitSettings } from '../config/credential-sets.js';
import { lazySchema } from '../lazy-schema.js';
import { LedgerUnavailableError } from '../ledger/errors.js';
import { LONGEST_LEARNED_WINDOW } from '../ledger/learned-limits.js';
import { callerPrincipal } from './principal.js';
import { VendError } from './vend-errors.js';

/**
 * How many reports the vend API takes, per caller and per credential set, in fixed windows of
 * `windowSeconds`; and how often rejection reports may cause a re-login of one set.
 *
 * The defaults are far above what a consumer using the client library sends, and low enough that one caller
 * cannot make the broker do unbounded work:
 * - Rate-limit reports: the client reports each vendor 429 and each success whose X-RateLimit headers show
 *   less room than the ledger said (once per window and value). Either follows a vendor call sent under a
 *   permit, and the ledger grants a token at most its quota across ALL consumers (the vendor's default: 50 a
 *   minute), so a set sees at most about that many reports a minute, a few more for the 429s of calls
 *   already in flight. 120 per caller and 600 per set a minute leave more than twice that (raise them for
 *   a set whose quota is above ~50 a minute).
 * - Rejection reports: the client reports a rejected token once per process; a consumer role may run up to
 *   Lambda's default account concurrency (1000) processes, all seeing the same rejection at once. Past the
 *   first, these reports name a token that is no longer current and cost one cached read. Hence 1000 per
 *   caller and 5000 per set a minute.
 * - Give-backs (POST .../permits/returns): each names one grant's receipt, honoured once, and a grant is at least
 *   one permit, so a token sees at most as many give-backs as its quota grants (50 a minute by default), a
 *   set at most twice that (its current and previous token), plus the re-sends of give-backs whose answer was
 *   lost. As for rate-limit reports, 120 per caller and 600 per set a minute leave more than twice that; they
 *   bound the ledger writes and reads one caller can cause by presenting receipts, and the spent receipt ids
 *   it can take (operations/give-back.ts, spentPlaceFor, keeps it to its share of those in any case).
 * - Re-logins driven by rejection reports: at most one per set every 300 s whatever the number of reports or
 *   callers (the refresher's storm guard alone allows one a minute). A rejected token is replaced at once
 *   the first time; only a token rejected again within 5 minutes of that re-login waits. The refresher's
 *   schedule still re-logs in on the token's own expiry, which no report can delay.
 */
export const reportLimitSettingsSchema = lazySchema(() =>
  z
    .strictObject({
      windowSeconds: z.number().positive().default(60),
      rateLimitReports: z
        .strictObject({
          perCaller: z.number().int().positive().default(120),
          perSet: z.number().int().positive().default(600),
        })
        .default({ perCaller: 120, perSet: 600 }),
      rejectionReports: z
        .strictObject({
          perCaller: z.number().int().positive().default(1000),
          perSet: z.number().int().positive().default(5000),
        })
        .default({ perCaller: 1000, perSet: 5000 }),
      giveBacks: z
        .strictObject({
          perCaller: z.number().int().positive().default(120),
          perSet: z.number().int().positive().default(600),
        })
        .default({ perCaller: 120, perSet: 600 }),
      rejectionReloginIntervalSeconds: z.number().positive().default(300),
    })
    // A per-caller limit at or above the per-set one would let one caller use up everyone's reports.
    .refine((s) => s.rateLimitReports.perCaller < s.rateLimitReports.perSet, {
      message: 'perCaller must be below perSet',
      path: ['rateLimitReports', 'perCaller'],
    })
    .refine((s) => s.rejectionReports.perCaller < s.rejectionReports.perSet, {
      message: 'perCaller must be below perSet',
      path: ['rejectionReports', 'perCaller'],
    })
    .refine((s) => s.giveBacks.perCaller < s.giveBacks.perSet, {
      message: 'perCaller must be below perSet',
      path: ['giveBacks', 'perCaller'],
    }),
);
export type ReportLimitSettings = z.infer<typeof reportLimitSettingsSchema>;
/**
 * The settings with REPORT_LIMITS unset (the usual case): the schema's defaults, written out so that a cold start
 * needs no zod for them (test/vend-report-limits.test.ts checks they are the schema's).
 */
export const DEFAULT_REPORT_LIMITS: ReportLimitSettings = {
  windowSeconds: 60,
  rateLimitReports: { perCaller: 120, perSet: 600 },
  rejectionReports: { perCaller: 1000, perSet: 5000 },
  giveBacks: { perCaller: 120, perSet: 600 },
  rejectionReloginIntervalSeconds: 300,
};
export type ReportLimitSettingsInput = z.input<typeof reportLimitSettingsSchema>;

/** What is limited: the two kinds of report, and give-backs (counted the same way, with their own figures). */
export type ReportKind = 'rateLimitReports' | 'rejectionReports' | 'giveBacks';

/**
 * 429 for a report over its limit (`details.reason` REPORT_LIMIT) or a rejection past the set's re-login bound
 * (RELOGIN_LIMIT): the vendor's code and body shape, Retry-After until it passes. Nothing was done.
 */
export class ReportLimitedError extends VendError {
  readonly status = 429;
  readonly code = 'RATE_LIMIT_EXCEEDED';
}

/** Kept for this long after its window, so a late read never finds a purged item mid-window. */
const PURGE_SLACK_SECONDS = 60;
const KIND_KEY: Record<ReportKind, string> = {
  rateLimitReports: 'rate',
  rejectionReports: 'rejection',
  giveBacks: 'return',
};
const KIND_NOUN: Record<ReportKind, string> = {
  rateLimitReports: 'reports',
  rejectionReports: 'reports',
  giveBacks: 'give-backs',
};

/** A short, fixed-length stand-in for the caller's principal (an IAM ARN can be long); logs name the ARN. */
export function callerKeyOf(callerArn: string): string {
  const principal = callerPrincipal(callerArn)?.key ?? callerArn;
  return createHash('sha256').update(principal).digest('hex').slice(0, 16);
}

export type ReloginClaim = { ok: true; release(): Promise<void> } | { ok: false; retryAfterSeconds: number };

/**
 * Report limits shared by every vend container: counters in the ledger table under their own key prefix
 * (`report#...`, never a ledger item's `token#...`), one item per window, each a conditional ADD that fails
 * once the count is reached, so no two containers can both take the last report. Items carry the table's
 * TTL attribute. An unanswered DynamoDB call fails the report (503 LEDGER_UNAVAILABLE): a report is never
 * acted on without being counted.
 */
export class ReportLimiter {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #clock: Clock;
  readonly settings: ReportLimitSettings;

  constructor(options: {
    client: DynamoDBClient;
    tableName: string;
    clock: Clock;
    settings?: ReportLimitSettingsInput;
  }) {
    this.#client = options.client;
    this.#tableName = options.tableName;
    this.#clock = options.clock;
    // The defaults as they are (the usual case): no schema built at cold start for them.
    const { settings } = options;
    this.settings =
      settings === undefined || settings === DEFAULT_REPORT_LIMITS
        ? DEFAULT_REPORT_LIMITS
        : reportLimitSettingsSchema.parse(settings);
  }

  /**
   * Counts one report of `kind` for the caller, then for the set; throws ReportLimitedError (429) when either
   * is full. The caller's count is taken first, so a caller over its own limit never uses up the set's.
   */
  async admit(kind: ReportKind, setId: string, callerArn: string): Promise<void> {
    const windowMs = this.settings.windowSeconds * 1000;
    const now = this.#clock.now();
    const window = Math.floor(now / windowMs);
    const windowEnd = (window + 1) * windowMs;
    const limits = this.settings[kind];
    for (const [scope, key, max] of [
      ['caller', reportCountKey(KIND_KEY[kind], setId, window, callerKeyOf(callerArn)), limits.perCaller],
      ['set', reportCountKey(KIND_KEY[kind], setId, window), limits.perSet],
    ] as const) {
      if (!(await this.#countOne(key, max, windowEnd))) {
        throw new ReportLimitedError(`too many ${KIND_NOUN[kind]} from this ${scope}; try again later`, {
          retryAfterSeconds: (windowEnd - now) / 1000,
          details: {
            reason: 'REPORT_LIMIT',
            scope,
            limit: max,
            windowSeconds: this.settings.windowSeconds,
          },
        });
      }
    }
  }

  /**
   * Takes the set's one rejection-driven re-login of the interval for `rejectedTokenId`. A claim for the same
   * token (concurrent reports, here or in another container) joins it: the refresher makes at most one login
   * per rejected token anyway. A claim for another token inside the interval is refused with the time left.
   * `release` gives the claim back when no login happened, so a refused or failed attempt costs nothing.
   */
  async claimRelogin(setId: string, rejectedTokenId: string, again = true): Promise<ReloginClaim> {
    const now = this.#clock.now();
    const intervalMs = this.settings.rejectionReloginIntervalSeconds * 1000;
    const key = reloginKey(setId);
    try {
      await this.#send(() =>
        this.#client.send(
          new UpdateItemCommand({
            TableName: this.#tableName,
            Key: key,
            UpdateExpression: 'SET #at = :now, #tok = :tok, #p = :purge',
            ConditionExpression: 'attribute_not_exists(#at) OR #at <= :cutoff',
            ExpressionAttributeNames: { '#at': 'at', '#tok': 'tokenId', '#p': TTL_ATTRIBUTE },
            ExpressionAttributeValues: {
              ':now': { N: String(now) },
              ':tok': { S: rejectedTokenId },
              ':cutoff': { N: String(now - intervalMs) },
              ':purge': { N: String(Math.ceil((now + intervalMs) / 1000) + PURGE_SLACK_SECONDS) },
            },
          }),
        ),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      const { Item } = await this.#send(() =>
        this.#client.send(new GetItemCommand({ TableName: this.#tableName, Key: key, ConsistentRead: true })),
      );
      const at = Number(Item?.at?.N ?? Number.NaN);
      if (Item?.tokenId?.S === rejectedTokenId) return { ok: true, release: async () => undefined };
      // Released meanwhile (the item is gone): try once more rather than refuse for nothing.
      if (!Number.isFinite(at) && again) return this.claimRelogin(setId, rejectedTokenId, false);
      return { ok: false, retryAfterSeconds: Math.max(1, (at + intervalMs - now) / 1000) };
    }
    return {
      ok: true,
      release: async () => {
        await this.#client
          .send(
            new DeleteItemCommand({
              TableName: this.#tableName,
              Key: key,
              ConditionExpression: '#at = :now AND #tok = :tok',
              ExpressionAttributeNames: { '#at': 'at', '#tok': 'tokenId' },
              ExpressionAttributeValues: { ':now': { N: String(now) }, ':tok': { S: rejectedTokenId } },
            }),
          )
          // Someone else's claim by now, or DynamoDB did not answer: then the claim simply runs out.
          .catch(() => undefined);
      },
    };
  }

  /** One more in the window's counter, unless it holds `max` already. */
  async #countOne(key: ItemKey, max: number, windowEnd: number): Promise<boolean> {
    try {
      await this.#send(() =>
        this.#client.send(
          new UpdateItemCommand({
            TableName: this.#tableName,
            Key: key,
            UpdateExpression: 'ADD #n :one SET #p = :purge',
            ConditionExpression: 'attribute_not_exists(#n) OR #n < :max',
            ExpressionAttributeNames: { '#n': 'n', '#p': TTL_ATTRIBUTE },
            ExpressionAttributeValues: {
              ':one': { N: '1' },
              ':max': { N: String(max) },
              ':purge': { N: String(Math.ceil(windowEnd / 1000) + PURGE_SLACK_SECONDS) },
            },
          }),
        ),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** A lost condition stays itself; any other failure is an outage of the table. */
  async #send<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) throw error;
      throw new LedgerUnavailableError('the report limits did not answer', { cause: error });
    }
  }
}

/**
 * The longest a vendor answer can hold the set back: its longest configured window (general or class) plus
 * the ledger's margin, in seconds. A vendor window longer than any configured one is not credible; with a
 * learned class (`[]`), the longest window a class may learn (a report's reset is what teaches its length).
 */
export function maxHoldSeconds(limits: RateLimitSettings): number {
  const learned = Object.values(limits.classes).some((l) => l.length === 0);
  const windows = [
    ...limits.general,
    ...Object.values(limits.classes).flat(),
    ...(learned ? [{ windowSeconds: LONGEST_LEARNED_WINDOW }] : []),
  ].map((l) => l.windowSeconds);
  return Math.max(...windows) + limits.marginSeconds;
}
