import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { Clock } from '../../clock.js';
import { LedgerUnavailableError } from '../errors.js';
import { emptyState, type LedgerState } from '../ledger-state.js';
import type { ItemFormat } from '../ring-plan.js';
import { ATTR } from './attributes.js';
import {
  fullWrite,
  type HeadAddition,
  headWrite,
  isHeadAttribute,
  ledgerKey,
  toStored,
} from './ledger-item.js';
import { decodeState, encodeState } from './state-codec.js';

/** What a process knows of a ledger item. */
export interface Snapshot {
  state: LedgerState;
  /** Head additions written since the item's last full write (a full write is conditional on it too). */
  fastWrites: number;
  /** The item's format (1 when there is no item). */
  format: ItemFormat;
  /** Format 2: the packed rings' keys in order (their heads' indices); empty otherwise. */
  directory: string[];
  /** The head attributes the item holds (even when its state is ignored as stale), to remove those not kept. */
  headAttributes: string[];
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
      : {
          state: emptyState(),
          fastWrites: 0,
          format: 1,
          directory: [],
          headAttributes: [],
          at: this.#clock.now(),
        };
  }

  /** Replaces the state with `state` (its version already incremented) if the item is still as in `read`. */
  writeFull(
    tokenId: string,
    state: LedgerState,
    retainMs: number,
    format: ItemFormat,
    read: Snapshot,
  ): Promise<WriteOutcome> {
    return this.#write(
      fullWrite(this.#tableName, tokenId, encodeState(state, retainMs, format), {
        version: read.state.version,
        fastWrites: read.fastWrites,
        headAttributes: read.headAttributes,
        secret: read.state.secret,
        share: read.state.share !== undefined,
      }),
    );
  }

  /**
   * Adds grants to the head slots, each within its bound, if no full write happened since `read`, at ledger time
   * `g`. Undefined (nothing sent) where the item cannot name a ring's head: a full write must.
   */
  addToHeads(
    tokenId: string,
    additions: readonly HeadAddition[],
    read: Snapshot,
    writeId: string,
    g: number,
  ): Promise<WriteOutcome> | undefined {
    const input = headWrite(
      this.#tableName,
      tokenId,
      additions,
      { version: read.state.version, format: read.format, directory: read.directory },
      writeId,
      g - read.state.time,
    );
    return input && this.#write(input);
  }

  /**
   * Counts `count` denied asks on an existing item (`dq`, ADD: it commutes with every other write, and no full
   * write touches it): a regional ledger's demand signal (shared/regions/renewer.ts). Best effort: a lost or
   * failed count only makes the demand look lower for one renewal.
   */
  async countAsked(tokenId: string, count: number): Promise<void> {
    await this.#client
      .send(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: ledgerKey(tokenId),
          UpdateExpression: 'ADD #dq :n',
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#dq': ATTR.asked, '#pk': ATTR.key },
          ExpressionAttributeValues: { ':n': { N: String(count) } },
        }),
      )
      .catch(() => undefined);
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
    const state = decodeState(stored, this.#purgeNow());
    return {
      state,
      fastWrites: stored.fastWrites,
      format: stored.format,
      directory: stored.format === 2 ? [...state.rings.keys()] : [],
      headAttributes: Object.keys(item).filter(isHeadAttribute),
      at,
    };
  }
}
