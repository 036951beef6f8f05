import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { attachDateReference } from '../aws/dynamodb-date-reference.js';
import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { RegionalRateLedger } from '../ledger/index.js';
import { LedgerClock } from '../ledger/ledger-clock.js';
import type { Telemetry } from '../telemetry.js';
import { DynamoTokenReader } from '../tokens/dynamo-token-reader.js';
import { LeaseStore } from './lease-store.js';
import { LeaseRenewer } from './renewer.js';
import { renewerTime } from './renewer-clock.js';

/**
 * A Region's lease renewer as functions/lease-renewer.ts runs it, on one DynamoDB client: its answers feed one
 * ClockReference (their `Date`), which corrects both the renewer's regional ledger and the renewer's own time
 * (renewer-clock.ts), so the fence it adopts and the times it writes are on the clock the ledger enforces them
 * on. `local` is the process's own clock: it paces the loop and the SDK's timings, and decides nothing. The tests
 * build it the same way, on a simulated clock.
 */
export function createLeaseRenewer(options: {
  client: DynamoDBClient;
  local: Clock;
  region: string;
  sets: readonly CredentialSetConfig[];
  /** `learned`: the table of the learned class limits (a two-Region stage's MRSC table); unset: the ledger's. */
  tables: { ledger: string; tokens: string; leases: string; learned?: string | undefined };
  telemetry: Telemetry;
  targetFloor?: number;
}): LeaseRenewer {
  const { client, local, telemetry } = options;
  const reference = attachDateReference(client, local);
  return new LeaseRenewer({
    region: options.region,
    sets: options.sets,
    tokens: new DynamoTokenReader({ client, tableName: options.tables.tokens }),
    ledger: new RegionalRateLedger({
      client,
      tableName: options.tables.ledger,
      clock: local,
      telemetry,
      reference,
      regional: true,
      // The learned limits the vend functions of both Regions keep on the MRSC table: the rings to lease.
      ...(options.tables.learned === undefined ? {} : { learnedTableName: options.tables.learned }),
    }),
    leases: new LeaseStore({ client, tableName: options.tables.leases }),
    clock: local,
    time: renewerTime(new LedgerClock({ local, reference, telemetry })),
    telemetry,
    ...(options.targetFloor === undefined ? {} : { targetFloor: options.targetFloor }),
  });
}
