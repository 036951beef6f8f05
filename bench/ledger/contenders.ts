import { CreateTableCommand, DynamoDB, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { RateLimiterDynamo, RateLimiterRes, RateLimiterUnion } from 'rate-limiter-flexible';
import type { Clock } from '../../shared/clock.js';
import type { RateLimitSettings } from '../../shared/config/credential-sets.js';
import { DynamoRateLedger } from '../../shared/ledger/index.js';

/** One rate limiter under test, as consumers see it: ask for permits, get them (at a time) or a wait. */
export interface Contender {
  name: string;
  /** `cls`: a request class of the set (only the ledger has classes). */
  acquire(
    consumer: number,
    count: number,
    cls?: string,
  ): Promise<{ granted: true; at: number } | { granted: false; retryAfterMs: number }>;
}

/** The broker's ledger; `processes` instances (separate caches and batches, like Lambda instances) share one token. */
export function ledgerContender(options: {
  name: string;
  client: DynamoDBClient;
  tableName: string;
  clock: Clock;
  limits: RateLimitSettings;
  processes: number;
  tokenId: string;
}): Contender {
  const ledgers = Array.from(
    { length: options.processes },
    () =>
      new DynamoRateLedger({ client: options.client, tableName: options.tableName, clock: options.clock }),
  );
  return {
    name: options.name,
    async acquire(consumer, count, cls) {
      const ledger = ledgers[consumer % ledgers.length] as DynamoRateLedger;
      const decision = await ledger.acquire({
        tokenId: options.tokenId,
        count,
        limits: options.limits,
        ...(cls === undefined ? {} : { class: cls }),
      });
      return decision.granted
        ? { granted: true, at: decision.grantedAt }
        : { granted: false, retryAfterMs: decision.retryAfterMs };
    },
  };
}

/** A DynamoDB client of the shape rate-limiter-flexible wants (the aggregated `DynamoDB` class). */
export function flexibleClient(endpoint: string): DynamoDB {
  return new DynamoDB({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
  });
}

/** rate-limiter-flexible's table: key `key`, as its `_createTable` makes it (TTL cannot be set on dynalite). */
export async function createFlexibleTable(client: DynamoDB, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: 'key', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'key', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
}

/**
 * rate-limiter-flexible set up as its documentation advises for "50 per minute and 1000 per hour": two
 * RateLimiterDynamo (fixed windows starting at the first consume) combined with RateLimiterUnion, and the
 * points of a rejected request given back with `reward`. RateLimiterUnion consumes from every limiter (a store
 * limiter counts the points even when it rejects), so without the give-back a request refused by the minute
 * limiter still spends hour points. It reads time from Date.now().
 */
export function flexibleContender(options: {
  name: string;
  client: DynamoDB;
  tableName: string;
  limits: { points: number; duration: number }[];
  key: string;
}): Contender {
  const limiters = options.limits.map(
    ({ points, duration }) =>
      new RateLimiterDynamo({
        storeClient: options.client,
        tableName: options.tableName,
        tableCreated: true,
        ttlSet: true,
        points,
        duration,
        keyPrefix: `rl${duration}`,
      }),
  );
  const union = new RateLimiterUnion(...limiters);
  return {
    name: options.name,
    async acquire(_consumer, count, cls) {
      if (cls !== undefined) throw new Error('the rate-limiter-flexible contender has no request classes');
      try {
        await union.consume(options.key, count);
        return { granted: true, at: Date.now() };
      } catch (rejection) {
        // Only the rejecting limiters are in the rejection; every limiter counted the points.
        const results = Object.values(rejection as Record<string, unknown>);
        if (results.length === 0 || !results.every((r) => r instanceof RateLimiterRes)) throw rejection;
        await Promise.all(limiters.map((limiter) => limiter.reward(options.key, count)));
        const waits = (results as RateLimiterRes[]).map((r) => r.msBeforeNext);
        return { granted: false, retryAfterMs: Math.max(1, ...waits) };
      }
    },
  };
}
