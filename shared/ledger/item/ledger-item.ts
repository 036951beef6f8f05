import type { AttributeValue, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { tokenKey } from '../../aws/keys.js';
import { ATTR } from './attributes.js';
import { WRITE_IDS_LIMIT } from './item-size.js';
import type { StoredLedger } from './state-codec.js';

/**
 * A fast grant's addition to one ring's head slot (I6: write-loop.ts grantAdditions says when a batch is one),
 * written by headWrite below.
 */
export interface HeadAddition {
  key: string;
  add: number;
  /** The head may hold at most this before the addition. */
  max: number;
  /** The latest sub-slot of the head's grants after the batch (added to the head's set of sub-slots). */
  sub: number;
}

/**
 * The ledger item in DynamoDB's terms: `pk` = `token#<tokenId>`, `v` version, `n` head additions since the
 * last full write, `t` ledger time, `cd` cooldown end, `cdr` the furthest cooldown claim and its caller,
 * `purgeAt` TTL (Unix seconds), `w` the write ids since the
 * last full write (a string set, see receipts.ts), `rk` the reservations' key and `rc` when they last changed
 * (LimitPlan.reservationsKey), `lv` the learned view of its grants (LedgerState.learnedVersion), `k` the receipt secret (set once, when the item is created),
 * `rs` a Region's share of the budgets when the ledger is one Region's of two (issue 27, region-share.ts:
 * `<fenceAt>;<ring key>=<limit>[:<floor>],...[;<home consumers>]`, base 36; written by adoptShare only, kept by
 * every full write but a one-Region ledger's once its fence passed, which removes it; release a6dc151 holds to it
 * as a regional ledger does, releases before it neither read nor remove it), `rsv` the version of the lease record
 * that share answers to and the fence it was stamped on (issue 33, `<version>;<fenceAt>` base 36; written with `rs`,
 * kept by every full write and removed with it; release a6dc151 leaves it as it is, and a share it adopted since has
 * another fence, so the stamp no longer counts). Then by format:
 * - 1 (text): `r` older slots, `cap` vendor caps and `cw` their windows (release N-1 reads `cd` and `cap`, not
 *   `cdr` and `cw`), per ring with grants in its head slot `h:<ring key>` (count)
 *   and `s:<ring key>` (the set of the sub-slots its grants fell in; the largest counts), `g` the spent receipt
 *   ids (a string set), `wp` the write ids carried from before the last full write (newest first, commas);
 * - 2 (packed): `r` = '2' (refused by readers of format 1 only), `rb` the older slots, caps, carried write ids
 *   and spent receipt ids (packed-codec.ts), `H<index>` the head count of the index-th packed ring, `T` the
 *   offsets (ms) of the head additions after the last full write.
 * Head attributes are top-level because only top-level attributes can be ADDed to, and ADD is what lets
 * concurrent grants in one slot commute.
 */
export const ledgerKey = (tokenId: string): Record<string, AttributeValue> => tokenKey(tokenId);

const HEAD = ATTR.head;
const SUBS = ATTR.headSubs;
/** Item format 2: `H<index base 36>` the head count of the index-th packed ring; `T` head additions' offsets. */
const PACKED_HEAD = new RegExp(`^${ATTR.packedHead}[0-9a-z]+$`);
const OFFSETS = ATTR.headOffsets;
/** Format 2's `r`: not a ring, so that a release that reads only format 1 refuses the item (fails closed). */
const PACKED_MARK = '2';

/** Whether an attribute is a head of either format (a full write removes those it does not keep). */
export const isHeadAttribute = (name: string): boolean =>
  name.startsWith(HEAD) || name.startsWith(SUBS) || PACKED_HEAD.test(name) || name === OFFSETS;

/**
 * The attribute a head addition to ring `key` adds to, given what the read item holds (`directory`: the packed
 * rings' keys, in format 2); undefined where a head addition cannot name the ring (a full write must).
 */
export function headAttribute(format: 1 | 2, directory: readonly string[], key: string): string | undefined {
  if (format === 1) return `${HEAD}${key}`;
  const index = directory.indexOf(key);
  return index < 0 ? undefined : `${ATTR.packedHead}${index.toString(36)}`;
}

export function toStored(item: Record<string, AttributeValue>): StoredLedger {
  const text = (name: string): string | undefined => item[name]?.S;
  const number = (name: string) => (item[name]?.N === undefined ? Number.NaN : Number(item[name]?.N));
  const format = item[ATTR.rings]?.S === PACKED_MARK ? 2 : 1;
  const heads: Record<string, number> = {};
  const headSubs: Record<string, number> = {};
  for (const [name, value] of Object.entries(item)) {
    const count = value.N === undefined ? Number.NaN : Number(value.N);
    if (format === 1 && name.startsWith(HEAD)) heads[name.slice(HEAD.length)] = count;
    if (format === 1 && name.startsWith(SUBS))
      headSubs[name.slice(SUBS.length)] = value.NS ? Math.max(...value.NS.map(Number)) : Number.NaN;
    if (format === 2 && PACKED_HEAD.test(name)) heads[String(Number.parseInt(name.slice(1), 36))] = count;
  }
  const stored: StoredLedger = {
    format,
    version: number(ATTR.version),
    fastWrites: item[ATTR.fastWrites] ? number(ATTR.fastWrites) : 0,
    time: number(ATTR.time),
    heads,
    headSubs,
    spent: item[ATTR.spent]?.SS ?? [],
    writeIds: item[ATTR.writeIds]?.SS ?? [],
    carriedWriteIds: text(ATTR.carriedWriteIds) ? (text(ATTR.carriedWriteIds) as string).split(',') : [],
    purgeAt: number(ATTR.purgeAt),
  };
  if (format === 2) {
    stored.packed = item[ATTR.packedRings]?.B ?? new Uint8Array();
    const offsets = item[OFFSETS]?.NS;
    if (offsets) stored.headOffset = Math.max(...offsets.map(Number));
  } else if (text(ATTR.rings) !== undefined) stored.rings = text(ATTR.rings);
  if (item[ATTR.cooldown]?.N !== undefined) stored.cooldownUntil = number(ATTR.cooldown);
  if (text(ATTR.caps) !== undefined) stored.caps = text(ATTR.caps);
  if (text(ATTR.capWindows) !== undefined) stored.capWindows = text(ATTR.capWindows);
  if (text(ATTR.cooldownClaim) !== undefined) stored.cooldownClaim = text(ATTR.cooldownClaim);
  if (text(ATTR.secret) !== undefined) stored.secret = text(ATTR.secret);
  if (text(ATTR.reservationsKey) !== undefined) stored.reservationsKey = text(ATTR.reservationsKey);
  if (item[ATTR.reservationsChangedAt]?.N !== undefined)
    stored.reservationsChangedAt = number(ATTR.reservationsChangedAt);
  if (item[ATTR.learnedVersion]?.N !== undefined) stored.learnedVersion = number(ATTR.learnedVersion);
  if (text(ATTR.share) !== undefined) stored.share = text(ATTR.share);
  if (text(ATTR.shareVersion) !== undefined) stored.shareVersion = text(ATTR.shareVersion);
  if (item[ATTR.asked]?.N !== undefined) stored.asked = number(ATTR.asked);
  return stored;
}

/**
 * Replaces the whole state, if nothing was written since it was read (neither a full write nor a head addition).
 * `read.headKeys`: the rings whose head attributes the item holds (to remove those no longer wanted).
 */
export function fullWrite(
  tableName: string,
  tokenId: string,
  stored: StoredLedger,
  read: FullRead,
): UpdateItemCommandInput {
  const names: Record<string, string> = {
    '#v': ATTR.version,
    '#n': ATTR.fastWrites,
    '#t': ATTR.time,
    '#p': ATTR.purgeAt,
  };
  const values: Record<string, AttributeValue> = {
    ':v': { N: String(stored.version) },
    ':zero': { N: '0' },
    ':t': { N: String(stored.time) },
    ':p': { N: String(stored.purgeAt) },
  };
  const sets = ['#v = :v', '#n = :zero', '#t = :t', '#p = :p'];
  const removes: string[] = [];
  const attribute = (name: string, value: AttributeValue | undefined) => {
    const placeholder = `#a${Object.keys(names).length}`;
    names[placeholder] = name;
    if (value) {
      values[`:${placeholder.slice(1)}`] = value;
      sets.push(`${placeholder} = :${placeholder.slice(1)}`);
    } else removes.push(placeholder);
  };
  setStateAttributes(stored, read, attribute);
  // The heads this write keeps, then every other head attribute of either format that the item holds: removed.
  const heads = headsOf(stored);
  for (const name of read.headAttributes) if (!heads.has(name)) attribute(name, undefined);
  for (const [name, value] of heads) attribute(name, value);
  const exists = read.version > 0;
  if (exists) {
    values[':expected'] = { N: String(read.version) };
    values[':fast'] = { N: String(read.fastWrites) };
  } else names['#pk'] = ATTR.key;
  return {
    TableName: tableName,
    Key: ledgerKey(tokenId),
    UpdateExpression: `SET ${sets.join(', ')}${removes.length ? ` REMOVE ${removes.join(', ')}` : ''}`,
    ConditionExpression: exists
      ? '#v = :expected AND (attribute_not_exists(#n) OR #n = :fast)'
      : 'attribute_not_exists(#pk)',
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ReturnValues: 'ALL_NEW',
    // DynamoDB returns the winner's item with the failure, which saves the re-read (dynalite does not).
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/** What a full write needs to know of the item it replaces. */
interface FullRead {
  version: number;
  fastWrites: number;
  headAttributes: readonly string[];
  secret: string | undefined;
  /** Whether the item read holds a share (`rs`): removed when the state no longer does. */
  share?: boolean;
}

/** The state's attributes but the heads, each set (or removed: `undefined`) through `attribute`. */
function setStateAttributes(
  stored: StoredLedger,
  read: FullRead,
  attribute: (name: string, value: AttributeValue | undefined) => void,
): void {
  const packed = stored.format === 2;
  attribute(ATTR.rings, packed ? { S: PACKED_MARK } : stored.rings ? { S: stored.rings } : undefined);
  attribute(ATTR.packedRings, packed ? { B: stored.packed ?? new Uint8Array() } : undefined);
  attribute(ATTR.cooldown, stored.cooldownUntil ? { N: String(stored.cooldownUntil) } : undefined);
  attribute(ATTR.caps, stored.caps ? { S: stored.caps } : undefined);
  attribute(ATTR.capWindows, stored.capWindows ? { S: stored.capWindows } : undefined);
  attribute(ATTR.cooldownClaim, stored.cooldownClaim ? { S: stored.cooldownClaim } : undefined);
  attribute(ATTR.spent, stored.spent.length > 0 ? { SS: stored.spent } : undefined);
  attribute(ATTR.writeIds, stored.writeIds.length > 0 ? { SS: stored.writeIds } : undefined);
  attribute(
    ATTR.carriedWriteIds,
    stored.carriedWriteIds.length > 0 ? { S: stored.carriedWriteIds.join(',') } : undefined,
  );
  attribute(
    ATTR.reservationsKey,
    stored.reservationsKey === undefined ? undefined : { S: stored.reservationsKey },
  );
  attribute(
    ATTR.reservationsChangedAt,
    stored.reservationsChangedAt === undefined ? undefined : { N: String(stored.reservationsChangedAt) },
  );
  // The secret is written once: the conditions below make sure nobody wrote one since the read found none.
  if (read.secret === undefined && stored.secret !== undefined) attribute(ATTR.secret, { S: stored.secret });
  // Never lowered by a write (a newer release's processes may hold a newer view); absent stays absent.
  if (stored.learnedVersion !== undefined)
    attribute(ATTR.learnedVersion, { N: String(stored.learnedVersion) });
  // Only adoptShare changes it (the state carries it from the read), and a one-Region ledger removes a lapsed one
  // (the stage went back to one Region: dynamo-ledger.ts).
  if (stored.share !== undefined) attribute(ATTR.share, { S: stored.share });
  else if (read.share) attribute(ATTR.share, undefined);
  // Its version beside it (issue 33): kept as read, gone with a share adopted without one, or with the share.
  if (stored.share !== undefined)
    attribute(ATTR.shareVersion, stored.shareVersion === undefined ? undefined : { S: stored.shareVersion });
  else if (read.share) attribute(ATTR.shareVersion, undefined);
}

/** The head attributes of `stored`, in its format: per ring with grants in its head slot. */
function headsOf(stored: StoredLedger): Map<string, AttributeValue> {
  const packed = stored.format === 2;
  const heads = new Map<string, AttributeValue>();
  for (const [key, count] of Object.entries(stored.heads)) {
    if (!count) continue;
    if (packed) heads.set(`${ATTR.packedHead}${Number(key).toString(36)}`, { N: String(count) });
    else {
      heads.set(`${HEAD}${key}`, { N: String(count) });
      heads.set(`${SUBS}${key}`, { NS: [String(stored.headSubs[key] ?? 0)] });
    }
  }
  return heads;
}

/**
 * Adds grants to head slots, each guarded by its bound, if no full write happened since `read.version`; adds the
 * write id to the item's write ids, guarded by "it is not there yet" (a re-sent copy of an applied write fails
 * instead of adding twice) and by the set's size (a full set waits for a full write, which resets it). In format
 * 2 it also adds its offset after the last full write (`offset`, ms) to `T`, which dates every head's latest
 * grant. Undefined when a ring has no head attribute in the item (format 2: not in its packed rings).
 */
export function headWrite(
  tableName: string,
  tokenId: string,
  additions: readonly HeadAddition[],
  read: { version: number; format: 1 | 2; directory: readonly string[] },
  writeId: string,
  offset: number,
): UpdateItemCommandInput | undefined {
  const names: Record<string, string> = { '#v': ATTR.version, '#n': ATTR.fastWrites, '#w': ATTR.writeIds };
  const values: Record<string, AttributeValue> = {
    ':expected': { N: String(read.version) },
    ':one': { N: '1' },
    ':ids': { SS: [writeId] },
    ':writeId': { S: writeId },
    ':full': { N: String(WRITE_IDS_LIMIT) },
  };
  const adds = ['#n :one', '#w :ids'];
  const conditions = [
    '#v = :expected',
    'NOT contains(#w, :writeId)',
    '(attribute_not_exists(#w) OR size(#w) < :full)',
  ];
  if (read.format === 2) {
    names['#t'] = OFFSETS;
    values[':offset'] = { NS: [String(offset)] };
    adds.push('#t :offset');
  }
  for (const [i, addition] of additions.entries()) {
    const head = headAttribute(read.format, read.directory, addition.key);
    if (head === undefined) return undefined;
    names[`#h${i}`] = head;
    values[`:add${i}`] = { N: String(addition.add) };
    values[`:max${i}`] = { N: String(addition.max) };
    adds.push(`#h${i} :add${i}`);
    conditions.push(`(attribute_not_exists(#h${i}) OR #h${i} <= :max${i})`);
    if (read.format === 1) {
      names[`#s${i}`] = `${SUBS}${addition.key}`;
      values[`:sub${i}`] = { NS: [String(addition.sub)] };
      adds.push(`#s${i} :sub${i}`);
    }
  }
  return {
    TableName: tableName,
    Key: ledgerKey(tokenId),
    UpdateExpression: `ADD ${adds.join(', ')}`,
    ConditionExpression: conditions.join(' AND '),
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ReturnValues: 'ALL_NEW',
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}
