import type { AttributeValue, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { PARTITION_KEY, TTL_ATTRIBUTE } from '../aws/tables.js';
import type { HeadAddition } from './fast-grant.js';
import { WRITE_IDS_LIMIT } from './receipts.js';
import type { StoredLedger } from './state-codec.js';

/**
 * The ledger item in DynamoDB's terms: `pk` = `token#<tokenId>`, `v` version, `n` head additions since the
 * last full write, `t` ledger time, `r` older slots, `cd` cooldown end, `cdr` the furthest cooldown claim and its
 * caller, `cap` vendor caps and `cw` their windows (release N-1 reads `cd` and `cap`, not these), `purgeAt` TTL (Unix
 * seconds), and per ring with grants in its head slot `h:<ring key>` (count) and `s:<ring key>` (the set of the
 * sub-slots its grants fell in; the largest counts), `g` the spent receipt ids and `w` the write ids since the
 * last full write (string sets, see receipts.ts), `wp` the write ids carried from before it (newest first,
 * comma-separated), `rk` the reservations' key and `rc` when they last changed (LimitPlan.reservationsKey),
 * `k` the receipt secret (set once, when the item is created). Head attributes are top-level because only
 * top-level attributes can be ADDed to, and ADD is what lets concurrent grants in one slot commute.
 */
export const ledgerKey = (tokenId: string): Record<string, AttributeValue> => ({
  [PARTITION_KEY]: { S: `token#${tokenId}` },
});

const HEAD = 'h:';
const SUBS = 's:';

export function toStored(item: Record<string, AttributeValue>): StoredLedger {
  const number = (name: string) => (item[name]?.N === undefined ? Number.NaN : Number(item[name]?.N));
  const heads: Record<string, number> = {};
  const headSubs: Record<string, number> = {};
  for (const [name, value] of Object.entries(item)) {
    if (name.startsWith(HEAD))
      heads[name.slice(HEAD.length)] = value.N === undefined ? Number.NaN : Number(value.N);
    if (name.startsWith(SUBS))
      headSubs[name.slice(SUBS.length)] = value.NS ? Math.max(...value.NS.map(Number)) : Number.NaN;
  }
  const stored: StoredLedger = {
    version: number('v'),
    fastWrites: item.n ? number('n') : 0,
    time: number('t'),
    heads,
    headSubs,
    spent: item.g?.SS ?? [],
    writeIds: item.w?.SS ?? [],
    carriedWriteIds: item.wp?.S ? item.wp.S.split(',') : [],
    purgeAt: number(TTL_ATTRIBUTE),
  };
  if (item.r?.S !== undefined) stored.rings = item.r.S;
  if (item.cd?.N !== undefined) stored.cooldownUntil = Number(item.cd.N);
  if (item.cap?.S !== undefined) stored.caps = item.cap.S;
  if (item.cw?.S !== undefined) stored.capWindows = item.cw.S;
  if (item.cdr?.S !== undefined) stored.cooldownClaim = item.cdr.S;
  if (item.k?.S !== undefined) stored.secret = item.k.S;
  if (item.rk?.S !== undefined) stored.reservationsKey = item.rk.S;
  if (item.rc?.N !== undefined) stored.reservationsChangedAt = Number(item.rc.N);
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
  read: { version: number; fastWrites: number; headKeys: readonly string[]; secret: string | undefined },
): UpdateItemCommandInput {
  const names: Record<string, string> = { '#v': 'v', '#n': 'n', '#t': 't', '#p': TTL_ATTRIBUTE };
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
  attribute('r', stored.rings ? { S: stored.rings } : undefined);
  attribute('cd', stored.cooldownUntil ? { N: String(stored.cooldownUntil) } : undefined);
  attribute('cap', stored.caps ? { S: stored.caps } : undefined);
  attribute('cw', stored.capWindows ? { S: stored.capWindows } : undefined);
  attribute('cdr', stored.cooldownClaim ? { S: stored.cooldownClaim } : undefined);
  attribute('g', stored.spent.length > 0 ? { SS: stored.spent } : undefined);
  attribute('w', stored.writeIds.length > 0 ? { SS: stored.writeIds } : undefined);
  attribute('wp', stored.carriedWriteIds.length > 0 ? { S: stored.carriedWriteIds.join(',') } : undefined);
  attribute('rk', stored.reservationsKey === undefined ? undefined : { S: stored.reservationsKey });
  attribute(
    'rc',
    stored.reservationsChangedAt === undefined ? undefined : { N: String(stored.reservationsChangedAt) },
  );
  // The secret is written once: the conditions below make sure nobody wrote one since the read found none.
  if (read.secret === undefined && stored.secret !== undefined) attribute('k', { S: stored.secret });
  for (const key of new Set([...Object.keys(stored.heads), ...read.headKeys])) {
    const count = stored.heads[key];
    attribute(`${HEAD}${key}`, count ? { N: String(count) } : undefined);
    attribute(`${SUBS}${key}`, count ? { NS: [String(stored.headSubs[key] ?? 0)] } : undefined);
  }
  const exists = read.version > 0;
  if (exists) {
    values[':expected'] = { N: String(read.version) };
    values[':fast'] = { N: String(read.fastWrites) };
  } else names['#pk'] = PARTITION_KEY;
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

/**
 * Adds grants to head slots, each guarded by its bound, if no full write happened since `version`; adds the
 * write id to the item's write ids, guarded by "it is not there yet" (a re-sent copy of an applied write fails
 * instead of adding twice) and by the set's size (a full set waits for a full write, which resets it).
 */
export function headWrite(
  tableName: string,
  tokenId: string,
  additions: readonly HeadAddition[],
  version: number,
  writeId: string | undefined,
): UpdateItemCommandInput {
  const names: Record<string, string> = { '#v': 'v', '#n': 'n' };
  const values: Record<string, AttributeValue> = { ':expected': { N: String(version) }, ':one': { N: '1' } };
  const adds = ['#n :one'];
  const conditions = ['#v = :expected'];
  if (writeId !== undefined) {
    names['#w'] = 'w';
    values[':ids'] = { SS: [writeId] };
    values[':writeId'] = { S: writeId };
    values[':full'] = { N: String(WRITE_IDS_LIMIT) };
    adds.push('#w :ids');
    conditions.push('NOT contains(#w, :writeId)', '(attribute_not_exists(#w) OR size(#w) < :full)');
  }
  additions.forEach((addition, i) => {
    names[`#h${i}`] = `${HEAD}${addition.key}`;
    names[`#s${i}`] = `${SUBS}${addition.key}`;
    values[`:add${i}`] = { N: String(addition.add) };
    values[`:max${i}`] = { N: String(addition.max) };
    values[`:sub${i}`] = { NS: [String(addition.sub)] };
    adds.push(`#h${i} :add${i}`, `#s${i} :sub${i}`);
    conditions.push(`(attribute_not_exists(#h${i}) OR #h${i} <= :max${i})`);
  });
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
