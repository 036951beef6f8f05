import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { DynamoRateLedger, RegionShare, RingSnapshot } from '../ledger/index.js';
import { allRings, GENERAL_SCOPE } from '../ledger/limit-plan.js';
import type { Telemetry } from '../telemetry.js';
import type { TokenStore } from '../tokens/token-store.js';
import { ledgerKeyFor } from '../vend/ledger-key.js';
import { type Budget, claimDropsAt, planRenewal, RENEW_MS, snapshotInSpan } from './lease.js';
import type { LeaseItem, LeaseStore, StoredLeaseRecord } from './lease-store.js';

/**
 * A Region's lease renewer (issue 27, docs/multi-region.md): for every ledger key a set's tokens count in (the
 * current and the previous token's, or the user's budget), it renews this Region's record in the lease item
 * and adopts the share it leased in the regional ledger, in the order shared/regions/lease.ts planRenewal
 * gives: from a strongly consistent read of the lease item, a LOWER share is adopted in the ledger (with the
 * fence in force) before the record saying so is written; the record (shares, snapshot, a lease until
 * now + LEASE_MS, demand) is written on the condition of the version read (someone else wrote first: plan again
 * from a fresh read); and only once that write is acknowledged is the new share adopted with its new fence. A
 * renewal that fails anywhere adopts nothing more: the ledger keeps enforcing at most what the item says, and
 * fences itself at its old fence if no renewal lands.
 *
 * Nothing here is on the grant path: the vend function's grant is one conditional write to its own Region's
 * ledger item, which holds the share (region-share.ts).
 */
export interface RenewerDeps {
  region: string;
  sets: readonly CredentialSetConfig[];
  tokens: Pick<TokenStore, 'read'>;
  ledger: Pick<DynamoRateLedger, 'regionView' | 'adoptShare' | 'planOf'>;
  leases: Pick<LeaseStore, 'read' | 'writeOwn'>;
  clock: Clock;
  telemetry: Pick<Telemetry, 'info' | 'warn'>;
  /** The least share of a Region with demand, as a share of the limit (lease.ts shareTargets); default 0.05. */
  targetFloor?: number;
}

/** One ledger key's renewal: what was written and adopted (token ids and counts only: nothing secret). */
export interface KeyRenewal {
  setId: string;
  ledgerKey: string;
  outcome: 'renewed' | 'failed';
  shares?: Record<string, number>;
  leaseUntil?: number;
  /** When this key should be renewed again at the latest (the other Region's claim may drop sooner). */
  nextAt: number;
  error?: string;
}

/** Lost races with the other Region's renewer in one renewal before it gives up until the next one. */
const MAX_CONFLICTS = 5;

export class LeaseRenewer {
  readonly #deps: RenewerDeps;
  /** By ledger key: the targets of the last renewal (their hysteresis), as planRenewal asks. */
  readonly #targets = new Map<string, Record<string, Record<string, number>>>();
  /** By ledger key: the item's count of denied asks at the last renewal, and when (the demand between). */
  readonly #asked = new Map<string, { asked: number; at: number }>();

  constructor(deps: RenewerDeps) {
    this.#deps = deps;
  }

  /** Denied asks a second since the last renewal of the key (the ledger's `dq`; 0 at the first one). */
  #deniedRate(ledgerKey: string, asked: number, now: number): number {
    const before = this.#asked.get(ledgerKey);
    this.#asked.set(ledgerKey, { asked, at: now });
    if (!before || now <= before.at || asked < before.asked) return 0;
    return (asked - before.asked) / ((now - before.at) / 1000);
  }

  /** Renews every ledger key of every set once; each key's failure is its own (logged, returned). */
  async renewAll(): Promise<KeyRenewal[]> {
    const { sets, tokens, clock } = this.#deps;
    // One renewal per ledger key: sets sharing a vendor user's budget (quotaScope user) share one key, and one
    // lease item must coordinate it, so each key is leased under the smallest set id that counts in it (the same
    // choice in both Regions, which have the same configuration).
    const byKey = new Map<string, CredentialSetConfig>();
    for (const set of [...sets].sort((a, b) => a.id.localeCompare(b.id))) {
      const state = await tokens.read(set.id, clock.now()).catch(() => undefined);
      const tokenIds = [state?.current?.tokenId, state?.previous?.tokenId].filter(
        (id): id is string => id !== undefined,
      );
      for (const tokenId of tokenIds) {
        const ledgerKey = ledgerKeyFor(set, tokenId);
        if (!byKey.has(ledgerKey)) byKey.set(ledgerKey, set);
      }
    }
    const renewals: KeyRenewal[] = [];
    for (const [ledgerKey, set] of byKey) renewals.push(await this.renewKey(set, ledgerKey));
    return renewals;
  }

  /** One key's renewal (see the class comment). */
  async renewKey(set: CredentialSetConfig, ledgerKey: string): Promise<KeyRenewal> {
    const { region, ledger, leases, clock, telemetry } = this.#deps;
    const limits = set.rateLimits;
    try {
      const plan = await ledger.planOf(limits, set.id);
      const budgets: Budget[] = allRings(plan)
        .filter((spec) => spec.scope === GENERAL_SCOPE || plan.classes.has(spec.scope))
        .map(({ key, limit, windowMs, spanMs }) => ({ key, limit, windowMs, spanMs }));
      // The reserved consumers homed here (their reservation's `region`): their reservations hold in this share.
      const home = (limits.reservations ?? []).filter((r) => r.region === region).map((r) => r.consumer);
      let item: LeaseItem = await leases.read(set.id, ledgerKey);
      for (let conflicts = 0; ; conflicts++) {
        const view = await ledger.regionView(ledgerKey, limits, set.id);
        const now = clock.now();
        const other = otherRecord(item, region);
        const demand = demandOf(view.snapshot, budgets) + this.#deniedRate(ledgerKey, view.asked, now);
        const renewal = planRenewal({
          region,
          current: view.share?.limits ?? {},
          demand,
          other,
          budgets,
          now,
          targetFloor: this.#deps.targetFloor ?? 0.05,
          ownSnapshot: view.snapshot,
          ...(this.#targets.has(ledgerKey) ? { previousTargets: this.#targets.get(ledgerKey) } : {}),
        });
        let snapshot = view.snapshot;
        if (renewal.adoptBefore) {
          // A lower share: in force before any reader of the lease item can see it (with the fence as it is).
          await ledger.adoptShare(ledgerKey, limits, set.id, {
            ...(view.share ?? { fenceAt: 0 }),
            limits: { ...(view.share?.limits ?? {}), ...renewal.adoptBefore },
          });
          snapshot = (await ledger.regionView(ledgerKey, limits, set.id)).snapshot;
        }
        const record: StoredLeaseRecord = {
          region,
          renewedAt: renewal.renewedAt,
          leaseUntil: renewal.leaseUntil,
          shares: renewal.shares,
          snapshot,
          demand,
        };
        const written = await leases.writeOwn(set.id, ledgerKey, record, item.version);
        if (!written.ok) {
          if (conflicts >= MAX_CONFLICTS)
            throw new Error(`${conflicts + 1} conflicting lease writes in a row`);
          item = written.current;
          continue;
        }
        this.#targets.set(ledgerKey, renewal.targets);
        const share: RegionShare = {
          ...(view.share?.floor ? { floor: view.share.floor } : {}),
          ...(home.length > 0 ? { home } : {}),
          limits: renewal.shares,
          fenceAt: renewal.fenceAt,
        };
        await ledger.adoptShare(ledgerKey, limits, set.id, share);
        // Next: the regular renewal, or sooner where the other Region's claim drops (a lost Region's tail ends).
        const drops = claimDropsAt(other, budgets, now).filter((at) => at > now);
        const nextAt = Math.min(now + RENEW_MS, ...drops);
        telemetry.info('lease renewed', {
          credentialSetId: set.id,
          ledgerKey,
          region,
          shares: renewal.shares,
          leaseUntil: renewal.leaseUntil,
          otherRegionLeased: other !== undefined && other.leaseUntil > now,
        });
        return {
          setId: set.id,
          ledgerKey,
          outcome: 'renewed',
          shares: renewal.shares,
          leaseUntil: renewal.leaseUntil,
          nextAt,
        };
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // The share and fence the ledger holds stay as they were: it fences itself if no renewal lands in time.
      telemetry.warn('lease renewal failed', { credentialSetId: set.id, ledgerKey, region, error: message });
      return { setId: set.id, ledgerKey, outcome: 'failed', nextAt: clock.now() + 1000, error: message };
    }
  }
}

const otherRecord = (item: LeaseItem, region: string) =>
  Object.values(item.records).find((record) => record.region !== region);

/**
 * This Region's granted demand: its grants a second over the shortest general window of its snapshot. Its denied
 * asks are added by the caller (the ledger counts them in the item, `dq`): without them a Region held at a share
 * of 0 would show no demand, and never get a share.
 */
function demandOf(snapshot: RingSnapshot, budgets: readonly Budget[]): number {
  const shortest = budgets
    .filter((b) => b.key.startsWith(`${GENERAL_SCOPE}/`))
    .reduce<Budget | undefined>((a, b) => (a && a.windowMs <= b.windowMs ? a : b), undefined);
  if (!shortest) return 0;
  const granted = snapshotInSpan(snapshot, shortest.key, snapshot.at - shortest.windowMs, 0);
  return granted / (shortest.windowMs / 1000);
}

/**
 * Renews until `stopAt` (the renewer's clock): every key at once, then each again at its KeyRenewal.nextAt (every
 * RENEW_MS, sooner when the other Region's claim drops), a failed one a second later. A scheduled run each minute
 * covers the minute with a few seconds to spare (the lease is LEASE_MS: two missed renewals still leave it held).
 */
export async function renewUntil(
  renewer: LeaseRenewer,
  clock: Clock,
  stopAt: number,
  sleep: (ms: number) => Promise<void>,
): Promise<KeyRenewal[]> {
  const all: KeyRenewal[] = [];
  while (clock.now() < stopAt) {
    const round = await renewer.renewAll();
    all.push(...round);
    const next = Math.min(clock.now() + RENEW_MS, ...round.map((r) => r.nextAt));
    if (next >= stopAt) break;
    await sleep(Math.max(0, next - clock.now()));
  }
  return all;
}
