import type { LeaseRecord } from '../shared/regions/lease.js';

/**
 * The lease item of one quota key as the simulation keeps it: one version and each Region's latest record, read
 * strongly consistent and written on the condition of the version read (as shared/regions/lease-store.ts does
 * against an MRSC table). Faults and latency are the simulation's; `calls` counts every read and write, so a run
 * can show that granting made none. Records are kept as written: the simulation never changes one after writing
 * it (a fresh record per renewal), so no copy is needed.
 */
export interface LeaseStoreDouble {
  readonly calls: number;
  read(): { version: number; records: Record<string, LeaseRecord> };
  /** Applies the record if the item is still at `version`; false when another write came first. */
  write(region: string, version: number, record: LeaseRecord): boolean;
  /** The checker's view, not a call: the Region's record in the item now. */
  latest(region: string): LeaseRecord | undefined;
}

export function leaseStoreDouble(): LeaseStoreDouble {
  let version = 0;
  let calls = 0;
  const records: Record<string, LeaseRecord> = {};
  return {
    get calls() {
      return calls;
    },
    read() {
      calls++;
      return { version, records: { ...records } };
    },
    write(region, expected, record) {
      calls++;
      if (expected !== version) return false;
      records[region] = record;
      version++;
      return true;
    },
    latest: (region) => records[region],
  };
}
