import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
// The SDK's own core (the client depends on it): its real retry strategy and response type, not copies.
import { HttpResponse } from '@smithy/core/protocols';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import type { Clock } from '../../shared/clock.js';
import { seededRandom } from './ledger-harness.js';

/**
 * A real DynamoDB client for dynalite whose attempts fail now and then the way they do in production, so code that
 * writes to DynamoDB can be tried under the faults that break idempotence. One seeded draw per attempt decides.
 *
 * - `lostAnswer` (writes only): the request reaches DynamoDB and is applied, but the answer never comes back (the
 *   connection is reset or times out on the way back). The SDK sees a TimeoutError and re-sends the same request.
 * - `throttle`: DynamoDB refuses the request unapplied with ProvisionedThroughputExceededException (what an
 *   on-demand table answers for a hot partition, such as one ledger item); the SDK retries it as throttling.
 * - `serverError`: DynamoDB answers InternalServerError (500) without applying; the SDK retries it as transient.
 * - `replicatedWriteConflict` (conditional writes only, and only where aimed or scripted: no random rate): what an
 *   MRSC table answers when another Region's write to the item is in flight, ReplicatedWriteConflictException
 *   (400), without applying. The SDK counts it retryable: aim it at every attempt to have it reach the caller.
 *
 * Draws are taken in the order attempts reach the middleware: sequential calls give the same faults for the same
 * seed; concurrent ones follow the event loop's interleaving. The SDK's retry capacity (per client) is real too:
 * at high fault rates it runs out and errors surface without retry, as in production.
 *
 * Dynalite has no transactions, and real DynamoDB would answer a re-sent TransactWriteItems from its
 * ClientRequestToken; a lost answer is only meaningful here for the single-item writes.
 */
export type Fault = 'lostAnswer' | 'throttle' | 'serverError' | 'replicatedWriteConflict';

/** DynamoDB operations, as named in its API (and in `stats`). */
export type DynamoOperation =
  | 'GetItem'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'Query'
  | 'Scan'
  | 'BatchGetItem'
  | 'BatchWriteItem'
  | 'TransactGetItems'
  | 'TransactWriteItems';

const WRITES: ReadonlySet<string> = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
]);

/** Probability per attempt of each fault (default 0; their sum at most 1), optionally for some operations only. */
export interface FaultRates {
  lostAnswer?: number;
  throttle?: number;
  serverError?: number;
  /** Operations that may be faulted; default all. Others pass untouched and use no draw. */
  commands?: readonly DynamoOperation[];
}

export interface FaultyDynamoDbOptions extends FaultRates {
  /** Endpoint of a running dynalite or DynamoDB Local (`startDynalite().endpoint`). */
  endpoint: string;
  /** Seed of the fault draws. Default 1. */
  seed?: number;
  /** The SDK's maxAttempts (first attempt included). Default 3, as in `createDynamoDbClient`. */
  maxAttempts?: number;
  /** Delay before each SDK retry, instead of the SDK's 50 ms / 1 s backoff bases. Default 1 ms. */
  retryDelayMs?: number;
  /**
   * The simulated true clock: the engine's answers then carry a `Date` header of this clock's time (whole
   * seconds, as DynamoDB sends it) instead of the real one, so that a ledger on a simulated clock can measure
   * its clock against DynamoDB's (shared/aws/dynamodb-date-reference.ts). Default: the engine's own.
   */
  date?: Clock;
}

export interface AttemptCounts {
  /** Attempts that reached dynalite (lost answers included). Conflicts are in `FaultStats.log` only. */
  sent: number;
  lostAnswer: number;
  throttle: number;
  serverError: number;
}

export interface FaultStats extends AttemptCounts {
  byCommand: Record<string, AttemptCounts>;
  /** Every attempt in order, with the fault it got (none: `fault` undefined). */
  log: { command: string; fault?: Fault }[];
}

/** An attempt as the fault middleware sees it: the operation and the input the command was given. */
export interface Attempt {
  command: string;
  input: Record<string, unknown>;
}

export interface FaultSwitch {
  /** Replaces the rates (an unnamed fault is off). */
  set(rates: FaultRates): void;
  off(): void;
  /**
   * Gives the next attempts of the chosen `commands` (reads too: aim with `set({ commands })`) these outcomes in
   * order ('none': clean), before random draws resume. `off()` clears it.
   */
  script(...outcomes: (Fault | 'none')[]): void;
  /**
   * Gives the next attempts that `match` picks (whatever `commands` says) these outcomes in order, ahead of the
   * script and the random draws: one chosen write's answer lost, say, wherever it falls among the others. An
   * SDK re-send is an attempt too, and is matched again while outcomes remain. `off()` clears it.
   */
  aim(match: (attempt: Attempt) => boolean, ...outcomes: (Fault | 'none')[]): void;
  readonly stats: FaultStats;
  resetStats(): void;
}

export interface FaultyDynamoDb {
  client: DynamoDBClient;
  faults: FaultSwitch;
}

const emptyCounts = (): AttemptCounts => ({ sent: 0, lostAnswer: 0, throttle: 0, serverError: 0 });

/**
 * A new client configured as `createDynamoDbClient({ endpoint })`, with the fault middleware at the deserialize step
 * below the deserializer: inside the SDK's retry loop (finalizeRequest), so every attempt, retries included, is
 * drawn for, and right above the HTTP handler, so an injected error answer is parsed by the SDK's own deserializer
 * into the same exception class the service's answer would give.
 */
export function createFaultyDynamoDbClient(options: FaultyDynamoDbOptions): FaultyDynamoDb {
  const { endpoint, seed = 1, maxAttempts = 3, retryDelayMs = 1, date } = options;
  let rates = checked(options);
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts,
    // The SDK's standard strategy (which errors to retry, retry capacity) with a short fixed backoff.
    retryStrategy: new ConfiguredRetryStrategy(maxAttempts, retryDelayMs),
    // A simulated Date months from the real one would otherwise move the SDK's signing clock with it.
    ...(date ? { disableClockSkewCorrection: true } : {}),
  });

  const random = seededRandom(seed);
  const scripted: (Fault | 'none')[] = [];
  const aimed: { match: (attempt: Attempt) => boolean; outcomes: (Fault | 'none')[] }[] = [];
  const stats: FaultStats = { ...emptyCounts(), byCommand: {}, log: [] };

  const draw = (command: string, input: Record<string, unknown>): Fault | undefined => {
    const aim = aimed.find((a) => a.match({ command, input }));
    if (aim) {
      const outcome = aim.outcomes.shift();
      if (aim.outcomes.length === 0) aimed.splice(aimed.indexOf(aim), 1);
      return outcome === 'none' ? undefined : outcome;
    }
    if (rates.commands && !rates.commands.includes(command as DynamoOperation)) return undefined;
    const outcome = scripted.shift() ?? pick(random(), rates, WRITES.has(command));
    return outcome === 'none' ? undefined : outcome;
  };
  /** One call per attempt: `sent` when it reached dynalite. */
  const record = (command: string, reached: boolean, fault?: Fault) => {
    const counts = stats.byCommand[command] ?? emptyCounts();
    stats.byCommand[command] = counts;
    const counted = fault && fault !== 'replicatedWriteConflict' ? [fault] : [];
    const keys = [...(reached ? (['sent'] as const) : []), ...counted];
    for (const key of keys) {
      counts[key]++;
      stats[key]++;
    }
    stats.log.push(fault ? { command, fault } : { command });
  };

  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = (context.commandName ?? 'unknown').replace(/Command$/, '');
      const fault = draw(command, (args.input ?? {}) as Record<string, unknown>);
      if (fault === 'replicatedWriteConflict' && !(WRITES.has(command) && conditional(args.input))) {
        throw new Error(
          `faulty-dynamodb: a replicatedWriteConflict is for conditional writes, not this ${command}`,
        );
      }
      if (fault === 'throttle' || fault === 'serverError' || fault === 'replicatedWriteConflict') {
        record(command, false, fault);
        return { response: errorAnswer(fault) };
      }
      const result = await next(args);
      record(command, true, fault);
      if (fault !== 'lostAnswer') return result;
      await drain(result.response);
      // As @smithy/node-http-handler rejects when the socket is reset before the answer is read.
      throw Object.assign(new Error('read ECONNRESET (answer lost by faulty-dynamodb)'), {
        name: 'TimeoutError',
        code: 'ECONNRESET',
      });
    },
    { step: 'deserialize', priority: 'low', name: 'faultyDynamoDb' },
  );
  if (date) {
    // Below the faults (added after them, same step and priority): only what the engine answered gets a Date.
    client.middlewareStack.add(
      (next) => async (args) => {
        const result = await next(args);
        if (HttpResponse.isInstance(result.response)) {
          const { headers } = result.response;
          delete headers.Date;
          headers.date = new Date(date.now()).toUTCString();
        }
        return result;
      },
      { step: 'deserialize', priority: 'low', name: 'simulatedDynamoDbDate' },
    );
  }

  return {
    client,
    faults: {
      set: (next) => {
        rates = checked(next);
      },
      off: () => {
        rates = {};
        scripted.length = 0;
        aimed.length = 0;
      },
      script: (...outcomes) => {
        scripted.push(...outcomes);
      },
      aim: (match, ...outcomes) => {
        if (outcomes.length > 0) aimed.push({ match, outcomes });
      },
      stats,
      resetStats: () => {
        Object.assign(stats, emptyCounts(), { byCommand: {}, log: [] });
      },
    },
  };
}

function pick(draw: number, rates: FaultRates, isWrite: boolean): Fault | 'none' {
  const { throttle = 0, serverError = 0, lostAnswer = 0 } = rates;
  if (draw < throttle) return 'throttle';
  if (draw < throttle + serverError) return 'serverError';
  if (isWrite && draw < throttle + serverError + lostAnswer) return 'lostAnswer';
  return 'none';
}

function checked(rates: FaultRates): FaultRates {
  const values = [rates.lostAnswer ?? 0, rates.throttle ?? 0, rates.serverError ?? 0];
  if (values.some((p) => !(p >= 0 && p <= 1)) || values.reduce((a, b) => a + b) > 1) {
    throw new RangeError(
      `fault probabilities must be in [0, 1] and sum to at most 1: ${JSON.stringify(rates)}`,
    );
  }
  const { lostAnswer, throttle, serverError, commands } = rates;
  return { lostAnswer, throttle, serverError, commands: commands && [...commands] };
}

const conditional = (input: unknown): boolean =>
  typeof (input as { ConditionExpression?: unknown } | undefined)?.ConditionExpression === 'string';

/** The answer DynamoDB's JSON protocol gives for the fault, for the SDK's deserializer to parse. */
function errorAnswer(fault: 'throttle' | 'serverError' | 'replicatedWriteConflict'): HttpResponse {
  const answers = {
    throttle: [
      400,
      'ProvisionedThroughputExceededException',
      'The level of configured provisioned throughput was exceeded',
    ],
    serverError: [500, 'InternalServerError', 'Internal server error'],
    // MRSC's answer while another Region's write to the item is in flight (not applied).
    replicatedWriteConflict: [
      400,
      'ReplicatedWriteConflictException',
      'The request was rejected because one or more items in the request are being modified by a request in another Region',
    ],
  } as const;
  const [statusCode, type, message] = answers[fault];
  const body = JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${type}`, message });
  return new HttpResponse({
    statusCode,
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': `faulty-dynamodb-${fault}` },
    body: Buffer.from(body),
  });
}

/** Reads the thrown-away answer to its end, so its keep-alive socket is free for the retry. */
async function drain(response: unknown): Promise<void> {
  const body = HttpResponse.isInstance(response) ? response.body : undefined;
  if (body && typeof body[Symbol.asyncIterator] === 'function') for await (const _ of body);
}
