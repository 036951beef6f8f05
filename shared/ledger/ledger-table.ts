import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
  type UpdateItemCommandInput,
  type UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import type { DeserializeMiddleware } from '@smithy/types';
import type { Clock } from '../clock.js';
import { LedgerUnavailableError } from './errors.js';
import type { HeadAddition } from './fast-grant.js';
import { fullWrite, headWrite, ledgerKey, toStored } from './ledger-item.js';
import { emptyState, type LedgerState } from './ledger-state.js';
import { decodeState, encodeState } from './state-codec.js';

/** The SDK re-sent a write whose earlier attempt may have been applied: not sent (see sentOnce). */
export class NotResentError extends Error {
  readonly code = 'NOT_RESENT';
  constructor(readonly earlier: unknown) {
    super('a write that may have been applied was not sent again');
    this.name = 'NotResentError';
  }
}

const THROTTLES = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);

/**
 * For a write without a write id: the SDK may retry it after a throttle (DynamoDB refused it unapplied), but
 * after any other failure (a lost answer, a timeout, a 500: it may have been applied) the next attempt is not
 * sent. Added to the command's own stack inside the retry loop, so it sees every attempt.
 */
const SENT_ONCE = { step: 'deserialize', name: 'ledgerSentOnce', priority: 'high', override: true } as const;
function sentOnce(): DeserializeMiddleware<UpdateItemCommandInput, UpdateItemCommandOutput> {
  let ambiguous: { error: unknown } | undefined;
  return (next) => async (args) => {
    if (ambiguous) throw new NotResentError(ambiguous.error);
    try {
      return await next(args);
    } catch (error) {
      if (!THROTTLES.has((error as { name?: string })?.name ?? '')) ambiguous = { error };
      throw error;
    }
  };
}

/** What a process knows of a ledger item. */
export interface Snapshot {
  state: LedgerState;
  /** Head additions written since the item's last full write (a full write is conditional on it too). */
  fastWrites: number;
  /** Rings whose head attributes the item holds (even when its state is ignored as stale). */
  headKeys: string[];
  /** Clock time it was learned. */
  at: number;
}

export type WriteOutcome = { ok: true; snapshot: Snapshot } | { ok: false; current?: Snapshot };

/**
 * The ledger table through the real DynamoDB client: consistent reads, and the two conditional writes. A lost
 * condition is an answer (`ok: false`, with the item as it is when DynamoDB returns it); every other SDK error
 * is thrown. Neither says whether an earlier attempt of the same write (an SDK retry after a lost answer) was
 * applied: the caller tells that by its write id (see DynamoRateLedger).
 */
export class LedgerTable {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #clock: Clock;
  readonly #purgeNow: () => number;

  /**
   * `clock` times the snapshots (how old the ledger's cache is); `purgeNow`, the time an item's purge time is
   * compared with, must never be later than DynamoDB's (an item taken for purged too early forgets its grants):
   * the earliest DynamoDB's clock can read (ledger-clock.ts). Default: `clock`.
   */
  constructor(
    client: DynamoDBClient,
    tableName: string,
    clock: Clock,
    purgeNow: () => number = () => clock.now(),
  ) {
    this.#client = client;
    this.#tableName = tableName;
    this.#clock = clock;
    this.#purgeNow = purgeNow;
  }

  async read(tokenId: string): Promise<Snapshot> {
    const { Item } = await this.#client.send(
      new GetItemCommand({ TableName: this.#tableName, Key: ledgerKey(tokenId), ConsistentRead: true }),
    );
    return Item
      ? this.#decode(Item)
      : { state: emptyState(), fastWrites: 0, headKeys: [], at: this.#clock.now() };
  }

  /** Replaces the state with `state` (its version already incremented) if the item is still as in `read`. */
  writeFull(tokenId: string, state: LedgerState, retainMs: number, read: Snapshot): Promise<WriteOutcome> {
    return this.#write(
      fullWrite(this.#tableName, tokenId, encodeState(state, retainMs), {
        version: read.state.version,
        fastWrites: read.fastWrites,
        headKeys: read.headKeys,
        secret: read.state.secret,
      }),
    );
  }

  /**
   * Adds grants to the head slots, each within its bound, if no full write happened since `read`. Without a
   * write id (the item's set of them is full), the addition cannot be recognised after a lost answer, so it is
   * never re-sent after one (see sentOnce): it applies at most once, and a failure without an answer is the
   * caller's to fail closed on.
   */
  addToHeads(
    tokenId: string,
    additions: readonly HeadAddition[],
    read: Snapshot,
    writeId: string | undefined,
  ): Promise<WriteOutcome> {
    const input = headWrite(this.#tableName, tokenId, additions, read.state.version, writeId);
    return this.#write(input, writeId === undefined);
  }

  async #write(
    input: ConstructorParameters<typeof UpdateItemCommand>[0],
    once = false,
  ): Promise<WriteOutcome> {
    try {
      const command = new UpdateItemCommand(input);
      if (once) command.middlewareStack.add(sentOnce(), SENT_ONCE);
      const { Attributes } = await this.#client.send(command);
      if (!Attributes) throw new LedgerUnavailableError('rate ledger write returned no item');
      return { ok: true, snapshot: this.#decode(Attributes) };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      return { ok: false, current: error.Item ? this.#decode(error.Item) : undefined };
    }
  }

  #decode(item: Parameters<typeof toStored>[0]): Snapshot {
    const stored = toStored(item);
    const at = this.#clock.now();
    return {
      state: decodeState(stored, this.#purgeNow()),
      fastWrites: stored.fastWrites,
      headKeys: Object.keys(stored.heads),
      at,
    };
  }
}
