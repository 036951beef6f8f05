import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import type { RegionalRateLedger, RegionShare, RingSnapshot } from '../ledger/index.js';
import { allRings, GENERAL_SCOPE, type LimitPlan } from '../ledger/limit-plan.js';
import { DIMENSION_REASON, Metric } from '../metric-names.js';
import type { Telemetry } from '../telemetry.js';
import type { TokenStore } from '../tokens/token-store.js';
import { ledgerKeyFor } from '../vend/ledger-key.js';
import {
  type Budget,
  claimDropsAt,
  demandOf,
  type LeaseRecord,
  POLL_MS,
  planRenewal,
  RENEW_MS,
  type RenewalPlan,
  renewsEarly,
  snapshotInSpan,
  TARGET_FLOOR,
} from './lease.js';
import type { LeaseItem, LeaseStore, StoredLeaseRecord } from './lease-store.js';
import {
  RENEWER_CLOCK_TOLERANCE_MS,
  type RenewalRefusal,
  type RenewerTime,
  refusalOf,
} from './renewer-clock.js';

/**
 * A Region's lease renewer (issue 27, docs/multi-region.md): for every ledger key a set's tokens count in (the
 * current and the previous token's, or the user's budget), it renews this Region's record in the lease item
 * and adopts the share it leased in the regional ledger, in the order shared/regions/lease.ts planRenewal
 * gives: from a strongly consistent read of the lease item, the ledger is capped at the planned shares (a LOWER
 * share in force, with the fence as it is) and stamped with the version the lease write will give the item,
 * before the record saying so is written; the record (shares, the snapshot the cap left, a lease until
 * now + LEASE_MS, demand) is written on the condition of the version read (someone else wrote first: plan again
 * from a fresh read); and only once that write is acknowledged is the new share adopted with its new fence and
 * that version. A renewal that fails anywhere adopts nothing more: the ledger keeps enforcing at most what the
 * item says, and fences itself at its old fence if no renewal lands. The version makes adoption monotone in the
 * lease record (issue 33): an overlapping run's slow adoption of an older record cannot raise a share a newer
 * renewal lowered (region-share.ts, adoptionOf).
 *
 * Every time it decides with (renewal times, leaseUntil, the fence, the other's claim, its demand) is its
 * ledger's time (renewer-clock.ts), never the process's own clock, which only paces it; where that time is not
 * known well enough, it refuses: renews nothing, adopts nothing, counts LeaseRenewalRefused.
 *
 * Nothing here is on the grant path: the vend function's grant is one conditional write to its own Region's
 * ledger item, which holds the share (region-share.ts).
 */
export interface RenewerDeps {
  region: string;
  sets: readonly CredentialSetConfig[];
  tokens: Pick<TokenStore, 'read'>;
  ledger: Pick<RegionalRateLedger, 'regionView' | 'adoptShare' | 'planOf'>;
  leases: Pick<LeaseStore, 'read' | 'writeOwn'>;
  /** The process's own clock: it paces the renewals (when to poll, renew, retry), and decides nothing. */
  clock: Clock;
  /**
   * Ledger time, which every decision is made with (renewer-clock.ts; functions/lease-renewer.ts builds it from
   * its DynamoDB client's reference). Unset: `clock` is ledger time (a simulated clock with no DynamoDB clock).
   */
  time?: RenewerTime;
  telemetry: Pick<Telemetry, 'info' | 'warn' | 'metric'>;
  /** The least share of a Region with demand, as a share of the limit (lease.ts shareTargets); TARGET_FLOOR unless set. */
  targetFloor?: number;
}

/** One ledger key's renewal or poll: what was written and adopted (token ids and counts only: nothing secret). */
export interface KeyRenewal {
  setId: string;
  ledgerKey: string;
  /**
   * `renewed`: written and adopted; `polled`: read and planned, nothing worth writing before the regular renewal;
   * `refused`: ledger time not known well enough (renewer-clock.ts), nothing written or adopted; `failed`: an
   * error (the lease store, the ledger, a newer renewal adopted first), nothing more adopted.
   */
  outcome: 'renewed' | 'polled' | 'refused' | 'failed';
  shares?: Record<string, number>;
  leaseUntil?: number;
  /** The process's own clock: when to look at this key again (a poll, a renewal or a retry). */
  nextAt: number;
  reason?: RenewalRefusal;
  error?: string;
}

/**
 * The budgets a renewal leases for a plan (the set's learned view as the renewer's ledger reads it): every general
 * ring and every class ring, a learned class's as learned (its probe until then); not the reservations' parts,
 * which the share of their window holds (region-share.ts heldPlan).
 */
export const leasedBudgets = (plan: LimitPlan): Budget[] =>
  allRings(plan)
    .filter((spec) => spec.scope === GENERAL_SCOPE || plan.classes.has(spec.scope))
    .map(({ key, limit, windowMs, spanMs }) => ({ key, limit, windowMs, spanMs }));

/** Lost races with the other Region's renewer in one renewal before it gives up until the next one. */
const MAX_CONFLICTS = 5;
/** A failed renewal is tried again this much later (the process's clock). */
const RETRY_MS = 1000;
/**
 * A renewal refused while DynamoDB's clock is not yet known well enough is tried again this much later: not a
 * whole number of seconds, so that the next answers fall at other points of DynamoDB's second, which is what
 * narrows the estimate (ledger-clock.ts). A cold start renews within a second or two.
 */
export const CLOCK_PROBE_MS = 143;

export class LeaseRenewer {
  readonly #deps: RenewerDeps;
  readonly #time: RenewerTime;
  /** By ledger key: the item's count of denied asks at each reading of the longest window (the demand they show). */
  readonly #asked = new Map<string, { asked: number; at: number }[]>();
  /** By ledger key: when (the process's clock) its next regular renewal is due. */
  readonly #due = new Map<string, number>();
  /** The ledger keys to renew and the set each is leased under, and when they were read (the process's clock). */
  #keys: { at: number; byKey: Map<string, CredentialSetConfig> } | undefined;

  constructor(deps: RenewerDeps) {
    this.#deps = deps;
    this.#time = deps.time ?? { now: () => deps.clock.now() };
  }

  /**
   * This Region's demand (lease.ts demandOf): its asks over RENEW_MS and over each general window, asks being its
   * grants (the snapshot's rings) and the asks its ledger denied (the item's `dq`, as this renewer's readings of the
   * longest window saw it grow; less than a window's worth of readings counts what they cover).
   */
  #demand(
    ledgerKey: string,
    snapshot: RingSnapshot,
    asked: number,
    now: number,
    budgets: readonly Budget[],
  ): number {
    const general = budgets
      .filter((b) => b.key.startsWith(`${GENERAL_SCOPE}/`))
      .sort((a, b) => a.windowMs - b.windowMs);
    const shortest = general[0];
    if (!shortest) return 0;
    const longest = (general.at(-1) as Budget).windowMs;
    const earlier = (this.#asked.get(ledgerKey) ?? []).filter((r) => r.at >= now - longest && r.at < now);
    // A count that went down (the item was purged and made again) starts over.
    const readings = earlier.every((r) => r.asked <= asked) ? earlier : [];
    readings.push({ asked, at: now });
    this.#asked.set(ledgerKey, readings);
    const deniedSince = (from: number) =>
      asked - (readings.find((r) => r.at >= from) ?? (readings.at(-1) as { asked: number })).asked;
    const windows = [{ key: shortest.key, windowMs: RENEW_MS }, ...general];
    return demandOf(
      windows.map(({ key, windowMs }) => ({
        windowMs,
        count: snapshotInSpan(snapshot, key, snapshot.at - windowMs, 0) + deniedSince(now - windowMs),
      })),
    );
  }

  /** The ledger keys to lease now, each under the smallest set id that counts in it. */
  async #ledgerKeys(fresh: boolean): Promise<Map<string, CredentialSetConfig>> {
    const { sets, tokens, clock } = this.#deps;
    const local = clock.now();
    if (!fresh && this.#keys && local - this.#keys.at < RENEW_MS) return this.#keys.byKey;
    // One renewal per ledger key: sets sharing a vendor user's budget (quotaScope user) share one key, and one
    // lease item must coordinate it, so each key is leased under the smallest set id that counts in it (the same
    // choice in both Regions, which have the same configuration).
    const byKey = new Map<string, CredentialSetConfig>();
    for (const set of [...sets].sort((a, b) => a.id.localeCompare(b.id))) {
      const state = await tokens.read(set.id, local).catch(() => undefined);
      const tokenIds = [state?.current?.tokenId, state?.previous?.tokenId].filter(
        (id): id is string => id !== undefined,
      );
      for (const tokenId of tokenIds) {
        const ledgerKey = ledgerKeyFor(set, tokenId);
        if (!byKey.has(ledgerKey)) byKey.set(ledgerKey, set);
      }
    }
    this.#keys = { at: local, byKey };
    return byKey;
  }

  /** Renews every ledger key of every set once, now; each key's failure is its own (logged, returned). */
  async renewAll(): Promise<KeyRenewal[]> {
    const renewals: KeyRenewal[] = [];
    for (const [ledgerKey, set] of await this.#ledgerKeys(true))
      renewals.push(await this.renewKey(set, ledgerKey));
    return renewals;
  }

  /**
   * Looks at every ledger key once: renews those whose regular renewal is due (RENEW_MS after the last, sooner
   * where the other Region's claim drops) and those whose plan moved enough to renew early (lease.ts renewsEarly);
   * the others are only read (`polled`).
   */
  async pollAll(): Promise<KeyRenewal[]> {
    const renewals: KeyRenewal[] = [];
    for (const [ledgerKey, set] of await this.#ledgerKeys(false)) {
      const due = this.#due.get(ledgerKey) ?? Number.NEGATIVE_INFINITY;
      renewals.push(await this.renewKey(set, ledgerKey, { early: this.#deps.clock.now() < due }));
    }
    return renewals;
  }

  /**
   * One key's renewal (see the class comment). `early`: only if the plan moved enough (renewsEarly), else it is
   * only read.
   */
  async renewKey(
    set: CredentialSetConfig,
    ledgerKey: string,
    options: { early?: boolean } = {},
  ): Promise<KeyRenewal> {
    try {
      return await this.#renew(set, ledgerKey, options.early === true);
    } catch (error) {
      return this.#unrenewed(set, ledgerKey, error);
    }
  }

  /** Read, plan, cap, write (again from the item it found after a lost race), then adopt (#adopt). */
  async #renew(set: CredentialSetConfig, ledgerKey: string, early: boolean): Promise<KeyRenewal> {
    const { region, ledger, leases, clock } = this.#deps;
    const limits = set.rateLimits;
    const plan = await ledger.planOf(limits, set.id);
    const budgets = leasedBudgets(plan);
    let item: LeaseItem = await leases.read(set.id, ledgerKey);
    let polling = early;
    for (let conflicts = 0; ; conflicts++) {
      const view = await ledger.regionView(ledgerKey, limits, set.id);
      const now = this.#time.now([plan]);
      const other = otherRecord(item, region);
      const demand = this.#demand(ledgerKey, view.snapshot, view.asked, now, budgets);
      const renewal = planRenewal({
        region,
        demand,
        other,
        budgets,
        now,
        targetFloor: this.#deps.targetFloor ?? TARGET_FLOOR,
        ownSnapshot: view.snapshot,
      });
      const own = item.records[region];
      if (polling && !renewsEarly({ region, plan: renewal, own, other, demand, budgets })) {
        const due = this.#due.get(ledgerKey) ?? clock.now();
        return { setId: set.id, ledgerKey, outcome: 'polled', nextAt: Math.min(due, clock.now() + POLL_MS) };
      }
      // Decided: a lost race below plans again from the item it found, and writes.
      polling = false;
      // The version this renewal's write gives the item: the ledger is capped and stamped with it first, so no
      // adoption of an older record (another run's, however slow) can raise the share from here on.
      const version = item.version + 1;
      const capped = await ledger.adoptShare(
        ledgerKey,
        limits,
        set.id,
        { limits: renewal.shares, fenceAt: renewal.fenceAt, version },
        { mode: 'cap' },
      );
      const record: StoredLeaseRecord = {
        region,
        renewedAt: renewal.renewedAt,
        leaseUntil: renewal.leaseUntil,
        shares: renewal.shares,
        snapshot: capped.snapshot,
        demand,
      };
      const written = await leases.writeOwn(set.id, ledgerKey, record, item.version);
      if (written.ok) {
        const homed = homeConsumers(set, region);
        const share: RegionShare = {
          ...(capped.share.floor ? { floor: capped.share.floor } : {}),
          ...(homed.length > 0 ? { home: homed } : {}),
          limits: renewal.shares,
          fenceAt: renewal.fenceAt,
          version,
        };
        return this.#adopt(set, ledgerKey, { share, renewal, other, budgets, now, early });
      }
      if (conflicts >= MAX_CONFLICTS) throw new Error(`${conflicts + 1} conflicting lease writes in a row`);
      item = written.current;
    }
  }

  /** Adopts the share its acknowledged write leased, and schedules the key's next renewal. */
  async #adopt(
    set: CredentialSetConfig,
    ledgerKey: string,
    written: {
      share: RegionShare;
      renewal: RenewalPlan;
      other: LeaseRecord | undefined;
      budgets: readonly Budget[];
      now: number;
      early: boolean;
    },
  ): Promise<KeyRenewal> {
    const { region, ledger, clock, telemetry } = this.#deps;
    const { share, renewal, other, budgets, now } = written;
    const adopted = await ledger.adoptShare(ledgerKey, set.rateLimits, set.id, share);
    if (adopted.outcome === 'stale')
      throw new Error(
        `a newer renewal of this Region adopted first (its version ${adopted.share.version ?? '-'}, ours ${share.version})`,
      );
    // Next: the regular renewal, or sooner where the other Region's claim drops (a lost Region's tail ends), as
    // late as this renewer's time may read behind: renewing a moment early would find the claim still there.
    const drops = claimDropsAt(other, budgets, now).filter((at) => at > now);
    const due = clock.now() + Math.min(RENEW_MS, ...drops.map((at) => at - now + RENEWER_CLOCK_TOLERANCE_MS));
    this.#due.set(ledgerKey, due);
    telemetry.info('lease renewed', {
      credentialSetId: set.id,
      ledgerKey,
      region,
      shares: renewal.shares,
      leaseUntil: renewal.leaseUntil,
      version: share.version,
      early: written.early,
      otherRegionLeased: other !== undefined && other.leaseUntil > now,
    });
    return {
      setId: set.id,
      ledgerKey,
      outcome: 'renewed',
      shares: renewal.shares,
      leaseUntil: renewal.leaseUntil,
      nextAt: Math.min(due, clock.now() + POLL_MS),
    };
  }

  /** A renewal that did not land: refused (ledger time not known well enough) or failed; nothing more adopted. */
  #unrenewed(set: CredentialSetConfig, ledgerKey: string, error: unknown): KeyRenewal {
    const { region, clock, telemetry } = this.#deps;
    const refusal = refusalOf(error);
    if (refusal) {
      // Renewed nothing, adopted nothing: the ledger fences itself at the fence it holds.
      telemetry.metric(Metric.LeaseRenewalRefused, 'Count', 1, {}, { [DIMENSION_REASON]: refusal.reason });
      telemetry.warn('lease renewal refused', {
        credentialSetId: set.id,
        ledgerKey,
        region,
        reason: refusal.reason,
        offsetMs: refusal.offsetMs,
        error: refusal.message,
      });
      const wait = refusal.reason === 'skew' ? RENEW_MS : CLOCK_PROBE_MS;
      return {
        setId: set.id,
        ledgerKey,
        outcome: 'refused',
        reason: refusal.reason,
        nextAt: clock.now() + wait,
        error: refusal.message,
      };
    }
    const message = error instanceof Error ? error.message : String(error);
    // The share and fence the ledger holds stay as they were: it fences itself if no renewal lands in time.
    telemetry.metric(Metric.LeaseRenewalFailed, 'Count', 1);
    telemetry.warn('lease renewal failed', { credentialSetId: set.id, ledgerKey, region, error: message });
    return { setId: set.id, ledgerKey, outcome: 'failed', nextAt: clock.now() + RETRY_MS, error: message };
  }
}

/** The reserved consumers homed in `region` (their reservation's `region`): their reservations hold in its share. */
const homeConsumers = (set: CredentialSetConfig, region: string): string[] =>
  (set.rateLimits.reservations ?? []).filter((r) => r.region === region).map((r) => r.consumer);

const otherRecord = (item: LeaseItem, region: string) =>
  Object.values(item.records).find((record) => record.region !== region);

/**
 * Renews until `stopAt` (the process's own clock, which paces the loop): every key at once, then every POLL_MS
 * each is read and renewed where due (every RENEW_MS, sooner when the other Region's claim drops or the plan moved
 * enough), a failed one a second later, one refused while DynamoDB's clock is being measured after CLOCK_PROBE_MS.
 * A scheduled run each minute covers the minute with a few seconds to spare (the lease is LEASE_MS: two missed
 * renewals still leave it held).
 */
export async function renewUntil(
  renewer: LeaseRenewer,
  clock: Clock,
  stopAt: number,
  sleep: (ms: number) => Promise<void>,
): Promise<KeyRenewal[]> {
  const all: KeyRenewal[] = [];
  while (clock.now() < stopAt) {
    const round = await renewer.pollAll();
    all.push(...round);
    const next = Math.min(clock.now() + POLL_MS, ...round.map((r) => r.nextAt));
    if (next >= stopAt) break;
    await sleep(Math.max(0, next - clock.now()));
  }
  return all;
}
