import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { leaseKey } from '../aws/keys.js';
import { lostToAnotherWriter } from '../aws/lost-write.js';
import { PARTITION_KEY } from '../aws/tables.js';
import { BrokerError } from '../errors.js';
import {
  decodeLeaseRecord,
  encodeLeaseRecord,
  leaseRecordProblem,
  type StoredLeaseRecord,
} from './lease-record-codec.js';

export type { StoredLeaseRecord } from './lease-record-codec.js';

/**
 * The lease item of one ledger key (issue 27, docs/multi-region.md), in the multi-Region strongly consistent
 * (MRSC) table: `pk` = `lease#<setId>#<quotaKey>`, `v` a version every write increments, and per Region `r:<region>`
 * its lease record (lease-record-codec.ts). Read strongly consistent; every write conditional on the version read
 * (MRSC evaluates it against the latest version in every Region), so two Regions' writers never both build on
 * the same version: the loser is told (`ok: false`, with a fresh read) and decides again. A write sets its own
 * Region's record only: it can never change the other's. No TTL and no transactions (MRSC has neither): the item
 * lives as long as the set, and every change is one UpdateItem.
 *
 * Lost answers: when an applied write's answer is lost, the SDK re-sends it and the copy fails its condition
 * (the version moved); when a write fails for good, the item is read. Either way, the Region's record in the item
 * being the one written says the write applied (each record is written by its Region's renewer alone, with a new
 * renewal time): it is then taken for applied, never applied again on top. The record names the write, where the
 * ledger carries write ids and the token store its lease id (shared/aws/lost-write.ts says why each): one writer per
 * record, a whole record per write, and nothing added to an item without TTL.
 */
export class LeaseStoreUnavailableError extends BrokerError {
  readonly code = 'LEASE_STORE_UNAVAILABLE';
}

/** A record that is not one (bad input from the lease module): refused, nothing written. */
export class InvalidLeaseRecordError extends BrokerError {
  readonly code = 'INVALID_LEASE_RECORD';
}

export interface LeaseItem {
  /** 0 while no item exists. */
  version: number;
  /** By Region name. */
  records: Record<string, StoredLeaseRecord>;
}

export type LeaseWriteOutcome =
  | { ok: true; item: LeaseItem }
  /** Someone wrote since `expectedVersion` (the other Region, or another renewer of this one): as it is now. */
  | { ok: false; current: LeaseItem };

const RECORD_PREFIX = 'r:';
const SET_ID = /^[A-Za-z0-9_-]{1,64}$/;

function checkKey(setId: string, quotaKey: string): void {
  if (typeof setId !== 'string' || !SET_ID.test(setId))
    throw new InvalidLeaseRecordError('setId must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -');
  // The ledger's key of the budget (shared/vend/ledger-key.ts): a token id or `set-<id>`.
  if (typeof quotaKey !== 'string' || !SET_ID.test(quotaKey))
    throw new InvalidLeaseRecordError('quotaKey must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -');
}

/** JSON with every object's keys sorted: DynamoDB keeps a map's keys in an order of its own. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );

const sameRecord = (a: StoredLeaseRecord | undefined, b: StoredLeaseRecord): boolean =>
  a !== undefined && canonical(a) === canonical(b);

/** The item's records, checked; a record that is not one makes the item unreadable (fails closed). */
function decodeItem(item: Record<string, AttributeValue>): LeaseItem {
  const version = Number(item.v?.N);
  if (!Number.isSafeInteger(version) || version < 1)
    throw new LeaseStoreUnavailableError('lease item unreadable: version');
  const records: Record<string, StoredLeaseRecord> = {};
  for (const [name, value] of Object.entries(item)) {
    if (!name.startsWith(RECORD_PREFIX)) continue;
    const record = decodeLeaseRecord(value);
    const region = name.slice(RECORD_PREFIX.length);
    // A Region whose peer's record cannot be read must not take the peer's share for free.
    if (!record || record.region !== region)
      throw new LeaseStoreUnavailableError(`lease item unreadable: the record of ${region.slice(0, 32)}`);
    records[region] = record;
  }
  return { version, records };
}

export class LeaseStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;

  constructor(options: { client: DynamoDBClient; tableName: string }) {
    this.#client = options.client;
    this.#tableName = options.tableName;
  }

  /** The item as it is now (strongly consistent); a record that is not one makes the item unreadable. */
  async read(setId: string, quotaKey: string): Promise<LeaseItem> {
    checkKey(setId, quotaKey);
    let item: Record<string, AttributeValue> | undefined;
    try {
      ({ Item: item } = await this.#client.send(
        new GetItemCommand({
          TableName: this.#tableName,
          Key: leaseKey(setId, quotaKey),
          ConsistentRead: true,
        }),
      ));
    } catch (error) {
      throw new LeaseStoreUnavailableError('lease store did not answer', { cause: error });
    }
    return item ? decodeItem(item) : { version: 0, records: {} };
  }

  /**
   * Writes this Region's record (`record.region`) if the item is still at `expectedVersion` (0: no item yet).
   * `ok: false` with the item as it is now when someone wrote first (a failed condition, or MRSC's
   * ReplicatedWriteConflictException: a concurrent write in another Region): decide again on `current`. A record
   * that fails validation throws InvalidLeaseRecordError before anything is sent.
   */
  async writeOwn(
    setId: string,
    quotaKey: string,
    record: StoredLeaseRecord,
    expectedVersion: number,
  ): Promise<LeaseWriteOutcome> {
    checkKey(setId, quotaKey);
    const problem = leaseRecordProblem(record);
    if (problem !== undefined) throw new InvalidLeaseRecordError(`lease record: ${problem}`);
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0)
      throw new InvalidLeaseRecordError('expectedVersion must be an integer ≥ 0');
    const exists = expectedVersion > 0;
    try {
      const { Attributes } = await this.#client.send(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: leaseKey(setId, quotaKey),
          UpdateExpression: 'SET #v = :next, #r = :record',
          ConditionExpression: exists ? '#v = :expected' : 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: {
            '#v': 'v',
            '#r': `${RECORD_PREFIX}${record.region}`,
            ...(exists ? {} : { '#pk': PARTITION_KEY }),
          },
          ExpressionAttributeValues: {
            ':next': { N: String(expectedVersion + 1) },
            ':record': encodeLeaseRecord(record),
            ...(exists ? { ':expected': { N: String(expectedVersion) } } : {}),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      if (!Attributes) throw new LeaseStoreUnavailableError('lease store write returned no item');
      return { ok: true, item: decodeItem(Attributes) };
    } catch (error) {
      if (error instanceof InvalidLeaseRecordError) throw error;
      const lost = lostToAnotherWriter(error);
      // Whatever went wrong, the item says whether this write (an earlier attempt of it) applied.
      let current: LeaseItem;
      try {
        current = await this.read(setId, quotaKey);
      } catch (readError) {
        throw lost
          ? readError
          : new LeaseStoreUnavailableError('lease store did not answer', { cause: error });
      }
      if (sameRecord(current.records[record.region], record) && current.version > expectedVersion)
        return { ok: true, item: current };
      if (lost) return { ok: false, current };
      throw new LeaseStoreUnavailableError('lease store did not answer', { cause: error });
    }
  }
}
