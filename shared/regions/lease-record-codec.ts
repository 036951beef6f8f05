import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { RingSnapshot } from '../ledger/ring-snapshot.js';
import type { LeaseRecord } from './lease.js';

/**
 * A Region's lease record as the lease store keeps it: the lease rules' record (shared/regions/lease.ts), which
 * the store checks before every write and after every read.
 */
export type StoredLeaseRecord = LeaseRecord;

/** Region names as AWS spells them (eu-west-1), or a test's; they name the record's attribute. */
const REGION = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** A ledger ring key (limit-plan.ts, RingSpec.key). */
const RING_KEY = /^[a-z*~@][a-z0-9-]*\/[0-9a-z]+(?:\.[0-9a-z]+)?$/;
const FIELDS = ['region', 'renewedAt', 'leaseUntil', 'shares', 'snapshot', 'demand'];
/** Slots a snapshot's ring may list: a ring keeps its window and margin plus two slots (limit-plan.ts). */
const MAX_SLOTS = 1000;
const MAX_RINGS = 64;

const isTime = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * What is wrong with a record, or undefined when it is one: every field of the contract and no other, times and
 * counts as non-negative integers, ring keys as the ledger names rings, a lease that ends no earlier than it was
 * renewed, slots within their ring.
 */
export function leaseRecordProblem(record: unknown): string | undefined {
  if (!isObject(record)) return 'not an object';
  const unknown = Object.keys(record).find((field) => !FIELDS.includes(field));
  if (unknown !== undefined) return `unknown field "${unknown.slice(0, 40)}"`;
  const { region, renewedAt, leaseUntil, shares, snapshot, demand } = record;
  if (demand !== undefined && !(typeof demand === 'number' && Number.isFinite(demand) && demand >= 0))
    return 'demand must be a number ≥ 0';
  if (typeof region !== 'string' || !REGION.test(region)) return 'region must be a Region name';
  if (!isTime(renewedAt)) return 'renewedAt must be a time in epoch ms';
  if (!isTime(leaseUntil) || leaseUntil < renewedAt)
    return 'leaseUntil must be a time no earlier than renewedAt';
  if (!isObject(shares)) return 'shares must be an object';
  for (const [key, share] of Object.entries(shares)) {
    if (!RING_KEY.test(key)) return `shares: "${key.slice(0, 40)}" is not a ring key`;
    if (!isTime(share)) return `shares.${key} must be an integer ≥ 0`;
  }
  if (!isObject(snapshot) || !isTime(snapshot.at) || !isObject(snapshot.rings))
    return 'snapshot must have a time `at` and `rings`';
  const rings = Object.entries(snapshot.rings);
  if (rings.length > MAX_RINGS) return `snapshot: more than ${MAX_RINGS} rings`;
  for (const [key, ring] of rings) {
    if (!RING_KEY.test(key)) return `snapshot: "${key.slice(0, 40)}" is not a ring key`;
    if (
      !isObject(ring) ||
      !isTime(ring.windowMs) ||
      !isTime(ring.slotMs) ||
      ring.slotMs < 1 ||
      ring.windowMs < 1
    )
      return `snapshot.${key}: windowMs and slotMs must be integers ≥ 1`;
    if (!Array.isArray(ring.slots) || ring.slots.length > MAX_SLOTS)
      return `snapshot.${key}.slots must be a list of at most ${MAX_SLOTS}`;
    for (const slot of ring.slots as unknown[]) {
      if (!isObject(slot) || Object.keys(slot).length !== 2 || !isTime(slot.start) || !isTime(slot.count))
        return `snapshot.${key}.slots: each is { start, count }, integers ≥ 0`;
      if (slot.start > snapshot.at) return `snapshot.${key}.slots: a slot after the snapshot`;
    }
  }
  return undefined;
}

/**
 * The record as one map attribute: `renewedAt` and `leaseUntil` as numbers (for a person reading the item, and
 * for conditions later), `shares` a map of numbers, and the snapshot as compact JSON (`s`): per ring
 * `[windowMs, slotMs, [start offset before at, count, ...]]`, about 10 bytes a slot instead of the 40 of its
 * object form: a record is written every few seconds in each Region, and billed by the KB.
 */
export function encodeLeaseRecord(record: StoredLeaseRecord): AttributeValue {
  const rings = Object.fromEntries(
    Object.entries(record.snapshot.rings).map(([key, ring]) => [
      key,
      [
        ring.windowMs,
        ring.slotMs,
        ring.slots.flatMap((slot) => [record.snapshot.at - slot.start, slot.count]),
      ],
    ]),
  );
  return {
    M: {
      region: { S: record.region },
      renewedAt: { N: String(record.renewedAt) },
      leaseUntil: { N: String(record.leaseUntil) },
      shares: { M: Object.fromEntries(Object.entries(record.shares).map(([k, n]) => [k, { N: String(n) }])) },
      s: { S: JSON.stringify({ at: record.snapshot.at, rings }) },
      ...(record.demand === undefined ? {} : { d: { N: String(record.demand) } }),
    },
  };
}

/** The record a map attribute holds; undefined where it is not one (the caller fails closed). */
export function decodeLeaseRecord(value: AttributeValue | undefined): StoredLeaseRecord | undefined {
  const map = value?.M;
  if (!map) return undefined;
  try {
    const { at, rings } = JSON.parse(map.s?.S ?? '') as { at: number; rings: Record<string, unknown> };
    const snapshot: RingSnapshot = { at, rings: {} };
    for (const [key, ring] of Object.entries(rings)) {
      const [windowMs, slotMs, flat] = ring as [number, number, number[]];
      const slots: { start: number; count: number }[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2)
        slots.push({ start: at - (flat[i] as number), count: flat[i + 1] as number });
      snapshot.rings[key] = { windowMs, slotMs, slots };
    }
    const record = {
      region: map.region?.S,
      renewedAt: Number(map.renewedAt?.N),
      leaseUntil: Number(map.leaseUntil?.N),
      shares: Object.fromEntries(Object.entries(map.shares?.M ?? {}).map(([k, n]) => [k, Number(n.N)])),
      snapshot,
      ...(map.d?.N === undefined ? {} : { demand: Number(map.d.N) }),
    };
    return leaseRecordProblem(record) === undefined ? (record as StoredLeaseRecord) : undefined;
  } catch {
    return undefined;
  }
}
