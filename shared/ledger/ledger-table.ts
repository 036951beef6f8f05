import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { Clock } from '../clock.js';
import { LedgerUnavailableError } from './errors.js';
import type { HeadAddition } from './fast-grant.js';
import { fullWrite, headWrite, ledgerKey, toStored } from './ledger-item.js';
import { emptyState, type LedgerState } from './ledger-state.js';
import { decodeState, encodeState } from './state-codec.js';

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

  constructor(client: DynamoDBClient, tableName: string, clock: Clock) {
    this.#client = client;
    this.#tableName = tableName;
    this.#clock = clock;
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

  /** Adds grants to the head slots, each within its bound, if no full write happened since `read`. */
  addToHeads(
    tokenId: string,
    additions: readonly HeadAddition[],
    read: Snapshot,
    writeId: string,
  ): Promise<WriteOutcome> {
    return this.#write(headWrite(this.#tableName, tokenId, additions, read.state.version, writeId));
  }

  async #write(input: ConstructorParameters<typeof UpdateItemCommand>[0]): Promise<WriteOutcome> {
    try {
      const { Attributes } = await this.#client.send(new UpdateItemCommand(input));
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
      state: decodeState(stored, at),
      fastWrites: stored.fastWrites,
      headKeys: Object.keys(stored.heads),
      at,
    };
  }
}
