import { parseRingKey } from '../ledger/limit-plan.js';
import type { RingSnapshot } from '../ledger/ring-snapshot.js';

/**
 * Two Regions, one vendor budget: each Region's regional ledger holds its grants to a SHARE of every ring, leased
 * from one small item in a strongly consistent multi-Region table (docs/multi-region.md has the proof). This
 * module is the rules alone: pure, no I/O, time passed in (each Region's own clock; they differ by at most the
 * clock bound).
 */

/** How long a written lease record stands: a Region that cannot renew for this long fences itself. */
export const LEASE_MS = 30_000;
/** How often a Region renews: three tries per lease before it lapses. */
export const RENEW_MS = 10_000;
/**
 * How often a renewer reads the lease item and its ledger between renewals, to renew early where the plan moved
 * (renewsEarly): a burst in one Region gets the other's idle share within a few polls, not two renewals.
 */
export const POLL_MS = 2_000;
/** A share moves early only by at least this part of its limit (renewsEarly); smaller moves wait for RENEW_MS. */
export const EARLY_MOVE = 0.1;
/** A Region held back by the other's claim renews early to publish a demand at least this many times its last. */
export const DEMAND_JUMP = 1.5;
/**
 * A Region's demand counts its asks over RENEW_MS too, once they are at least this many (demandOf): a burst shows
 * within seconds, where the minute's average would take the minute; one ask of a sparse Region is not a burst.
 */
export const SHORT_DEMAND_ASKS = 3;
/** The least share of a Region with demand, as a share of each limit (shareTargets' floor), unless set. */
export const TARGET_FLOOR = 0.02;

/**
 * A Region's demand (asks a second, any unit both Regions share) from its asks over some windows (the budgets'
 * windows, and RENEW_MS): the highest rate of any of them, RENEW_MS's only from SHORT_DEMAND_ASKS asks on. The
 * budgets' windows keep a sparse Region's demand (one ask a minute shows in the hour) so that it keeps its part of
 * what is free; the short window shows a burst at once, so that the other Region yields its idle share within a
 * poll or two (renewsEarly), not a minute.
 */
export function demandOf(asks: readonly { windowMs: number; count: number }[]): number {
  let most = 0;
  for (const { windowMs, count } of asks) {
    if (windowMs <= 0 || (windowMs <= RENEW_MS && count < SHORT_DEMAND_ASKS)) continue;
    most = Math.max(most, count / (windowMs / 1000));
  }
  return most;
}
/** The most two Regions' clocks may differ (ms); the fence and the claims count it. */
export const CLOCK_BOUND_MS = 1_000;

/** One limit of one quota key, as the ledger's LimitPlan has it (a RingSpec fits). */
export interface Budget {
  /** The ring key (e.g. `*\/1o`): names the share and the snapshot's ring. */
  key: string;
  limit: number;
  windowMs: number;
  /** The ring's grant span, window plus margin: a permit granted at g may be sent until g + margin. */
  spanMs: number;
}

export interface LeaseRecord {
  region: string;
  /** The writer's clock when it read the item it computed this record from. */
  renewedAt: number;
  /** renewedAt + LEASE_MS: the writer's ledger grants nothing beyond its floor after fenceAt(record). */
  leaseUntil: number;
  /** By ring key: the most this Region may grant in any span of that ring while the record stands. */
  shares: Record<string, number>;
  /** Its regional ledger's rings, read after any lowered share was adopted and before this record was written. */
  snapshot: RingSnapshot;
  /**
   * Its recent demand (asks per second, any unit both Regions share): what the other Region splits the targets
   * by. Not in the contract's first shape: without it a Region at share 0 could never say it needs one.
   */
  demand?: number;
}

export interface LeaseOptions {
  /** CLOCK_BOUND_MS unless set. */
  clockBoundMs?: number;
  /** What a fenced ledger still grants per span (0 by default: a Region without a lease grants nothing). */
  floor?: number;
}

/**
 * The moment (the Region's own clock) after which its ledger grants nothing beyond its floor unless renewed.
 * One clock bound early: at that moment no other Region's clock can read past leaseUntil yet, so every reader
 * that still counts the lease as holding is right to.
 */
export const fenceAt = (record: Pick<LeaseRecord, 'leaseUntil'>, clockBoundMs = CLOCK_BOUND_MS): number =>
  record.leaseUntil - clockBoundMs;

/**
 * Whether another Region counts the lease as holding at `now` (the reader's clock): one more clock bound than
 * the fence needs, as the contract has it, so a reader is safe even when the bound is exceeded by up to itself.
 */
export const leaseHolds = (record: LeaseRecord, now: number, clockBoundMs = CLOCK_BOUND_MS): boolean =>
  now < record.leaseUntil + clockBoundMs;

/**
 * The snapshot's grants of ring `key` that may lie at or after `after` (the reader's clock): a slot counts in
 * full if any moment of it, moved by up to the clock bound, may be that late (slots are all the snapshot knows).
 */
export function snapshotInSpan(
  snapshot: RingSnapshot,
  key: string,
  after: number,
  clockBoundMs: number,
): number {
  const ring = snapshot.rings[key];
  if (!ring) return 0;
  let count = 0;
  for (const slot of ring.slots) if (slot.start + ring.slotMs + clockBoundMs > after) count += slot.count;
  return count;
}

/**
 * The most the writer can grant in ring `budget` after its snapshot and up to its fence, whatever it did: its
 * own share of that ring, and of every shorter ring of the same scope as many times as that ring's window fits
 * in the interval (plus one, for the edges). Its ledger held every span to its share, and its share never rose
 * before the record saying so was written (planRenewal), so no later grant under this record escapes this.
 * For the minute ring this is its share; for the hour ring it is about a minute's share, not an hour's: a
 * Region that held 500 of the hour and used 100 does not keep 400 from the other Region for an hour.
 */
export function tailOf(record: LeaseRecord, budget: Budget, clockBoundMs = CLOCK_BOUND_MS): number {
  const interval = Math.max(0, fenceAt(record, clockBoundMs) - record.snapshot.at);
  const scope = ringOf(budget.key).scope;
  let tail = shareIn(record, budget);
  for (const [key, share] of Object.entries(record.shares)) {
    const ring = ringOf(key);
    if (ring.scope !== scope || ring.windowMs > budget.windowMs || ring.windowMs <= 0) continue;
    tail = Math.min(tail, share * (Math.floor(interval / ring.windowMs) + 1));
  }
  return tail;
}

const parsedKeys = new Map<string, ReturnType<typeof parseRingKey>>();
/** parseRingKey, once per key: claims are computed on every renewal for every ring. */
function ringOf(key: string): ReturnType<typeof parseRingKey> {
  let parsed = parsedKeys.get(key);
  if (!parsed) {
    parsed = parseRingKey(key);
    if (parsedKeys.size > 10_000) parsedKeys.clear();
    parsedKeys.set(key, parsed);
  }
  return parsed;
}

/** A share the record does not name counts as the whole limit: a reader never assumes less than it may be. */
const shareIn = (record: LeaseRecord, budget: Budget): number =>
  Math.min(budget.limit, record.shares[budget.key] ?? budget.limit);

/**
 * What the other Region's grants may occupy of `budget` in a span ending at `now` (the reader's clock) or later,
 * as long as it does not write a new record: `snap` = its snapshot's grants that may still be in the span,
 * `share` its share, `tail` what it may have granted after the snapshot (tailOf).
 *   - While its grants after the snapshot may still be in a span (until leaseUntil + bound + span): at most
 *     max(snap, share), because its ledger held every span to its share: if its last grant in a span came after
 *     the snapshot, that span holds at most its share; if not, only snapshot grants. And at most snap + tail.
 *     While the lease holds, the first is max(share, snapshot) of the contract; the second only tightens it.
 *   - After: only snapshot grants (and what a fenced ledger still grants, the floor) can be in the span.
 * A share that shrank is not free until the grants made under it leave the span: they are in the snapshot.
 */
export function claimOf(
  record: LeaseRecord | undefined,
  budget: Budget,
  now: number,
  options: LeaseOptions = {},
): number {
  const bound = options.clockBoundMs ?? CLOCK_BOUND_MS;
  const floor = options.floor ?? 0;
  // Never leased: its ledger was never given more than the floor.
  if (!record) return Math.min(budget.limit, floor);
  const snap = snapshotInSpan(record.snapshot, budget.key, now - budget.spanMs, bound);
  const tailLive = now < record.leaseUntil + bound + budget.spanMs;
  const claim = tailLive
    ? Math.min(Math.max(snap, shareIn(record, budget), floor), snap + tailOf(record, budget, bound) + floor)
    : Math.max(snap, floor);
  return Math.min(budget.limit, claim);
}

/** The moments after `now` at which the record's claim on some budget falls by its tail: worth renewing at. */
export function claimDropsAt(
  record: LeaseRecord | undefined,
  budgets: readonly Budget[],
  now: number,
  clockBoundMs = CLOCK_BOUND_MS,
): number[] {
  if (!record) return [];
  return budgets.map((b) => record.leaseUntil + clockBoundMs + b.spanMs).filter((t) => t > now);
}

/** Never more than the limit minus the other Region's claim, never more than the target, never below 0. */
export const allowedShare = (target: number, otherClaim: number, budget: Pick<Budget, 'limit'>): number =>
  Math.max(0, Math.min(target, budget.limit - otherClaim));

/**
 * Each Region's target share of every budget: what it uses now (`used`, by Region and ring key: what its grants
 * occupy of the span, planRenewal says how each Region's is known) plus its part of what is FREE, split by recent
 * demand: a Region with no demand gets nothing of it (so an active/passive pair gives the active Region the whole
 * budget), every Region with demand at least `floor` of the limit (so it can serve at once when its demand grows),
 * the rest in proportion to demand; with no demand anywhere, evenly. The targets of a budget add up to its limit
 * (the largest remainders get the odd units), and a budget freed by old grants leaving the span goes where the
 * demand is, as a single ledger would give it. They move with every renewal and need no hysteresis: a share that
 * stays at least the Region's use never strands anything, since the other Region's claim of it is its snapshot
 * anyway. (Targets as fractions of the limit would need one, a lowered share freeing nothing until the grants
 * made under it leave the span: docs/multi-region.md measured both.)
 */
export function shareTargets(
  demands: Record<string, number>,
  budgets: readonly Pick<Budget, 'key' | 'limit'>[],
  floor: number,
  used: Record<string, Record<string, number>>,
): Record<string, Record<string, number>> {
  const regions = Object.keys(demands).sort();
  const targets: Record<string, Record<string, number>> = Object.fromEntries(regions.map((r) => [r, {}]));
  for (const budget of budgets) {
    const inUse = regions.map((r) => Math.max(0, used[r]?.[budget.key] ?? 0));
    const free = Math.max(0, budget.limit - inUse.reduce((a, b) => a + b, 0));
    const split = splitBudget(regions, demands, free, (floor * budget.limit) / Math.max(1, free));
    regions.forEach((r, i) => {
      (targets[r] as Record<string, number>)[budget.key] = (inUse[i] ?? 0) + (split[r] ?? 0);
    });
  }
  return targets;
}

/** `limit` split by demand with `floor` of it for each Region with demand (shareTargets; all evenly if none has). */
export function splitBudget(
  regions: readonly string[],
  demands: Record<string, number>,
  limit: number,
  floor: number,
): Record<string, number> {
  const active = regions.filter((r) => (demands[r] ?? 0) > 0);
  const weights = active.length > 0 ? active : regions;
  if (weights.length === 0) return {};
  const each = Math.min(Math.ceil(Math.max(0, floor) * limit), Math.floor(limit / weights.length));
  const rest = limit - each * weights.length;
  const total = active.length > 0 ? active.reduce((sum, r) => sum + (demands[r] ?? 0), 0) : weights.length;
  const exact = weights.map((r) => (rest * (active.length > 0 ? (demands[r] ?? 0) : 1)) / total);
  const whole = exact.map(Math.floor);
  let odd = rest - whole.reduce((a, b) => a + b, 0);
  // Largest remainders first; ties in region order, so both Regions compute the same split.
  const order = exact
    .map((x, i) => ({ i, frac: x - Math.floor(x) }))
    .sort((a, b) => b.frac - a.frac || a.i - b.i);
  for (const { i } of order) {
    if (odd <= 0) break;
    whole[i] = (whole[i] ?? 0) + 1;
    odd--;
  }
  const split: Record<string, number> = Object.fromEntries(regions.map((r) => [r, 0]));
  weights.forEach((r, i) => {
    split[r] = each + (whole[i] ?? 0);
  });
  return split;
}

/** The name the other Region goes by in the targets while it has never written a record. */
const OTHER = '~other';

export interface RenewalPlan {
  /** Both Regions' targets as this renewer sees them (renewsEarly compares the other's with its share). */
  targets: Record<string, Record<string, number>>;
  /**
   * The shares to write in the record. The own ledger is capped at them BEFORE the write (every ring the ledger
   * holds lowered to at most its share here, the fence in force kept), and adopts them (with the new fence) once
   * the write is acknowledged: a lower share is in force before any reader can see it, or the other Region could
   * take what this one still grants; a higher share is written first and adopted after, so no reader ever sees
   * less than the ledger enforces.
   */
  shares: Record<string, number>;
  renewedAt: number;
  leaseUntil: number;
  /** fenceAt of the record: what the ledger adopts with `shares` after the write. */
  fenceAt: number;
}

/**
 * One renewal, from a fresh strongly consistent read of the lease item at `now` (the renewer's ledger time). The
 * renewer then: caps its ledger at `shares`, stamped with the version its write will give the item (read version
 * + 1), and takes its ledger's snapshot as the cap left it; writes the record (shares, snapshot, renewedAt,
 * leaseUntil, demand) on the condition of the version it read (a failed condition: plan again from a fresh read);
 * and only on an acknowledged write adopts `shares` with `fenceAt` and that version. An unacknowledged write
 * adopts nothing more: whatever the item now says is at least what the ledger enforces.
 */
export function planRenewal(input: {
  region: string;
  demand: number;
  /** The other Region's record, as read (absent: it never leased). */
  other: LeaseRecord | undefined;
  budgets: readonly Budget[];
  now: number;
  /** The least share of a Region with demand, as a share of the limit (shareTargets). */
  targetFloor: number;
  /**
   * The own ledger's snapshot at `now`: the targets split only the free part of each budget, on top of what each
   * Region uses (shareTargets' `used`), so a budget freed by one Region's grants leaving the span goes to where
   * the demand is.
   */
  ownSnapshot: RingSnapshot;
  options?: LeaseOptions;
  /** The claim rule: claimOf. Another only for the simulation's controls, which must be caught. */
  claim?: (other: LeaseRecord | undefined, budget: Budget, now: number) => number;
  /** The targets rule: shareTargets. Another only for the simulation's alternatives (local/fraction-targets.ts). */
  targets?: typeof shareTargets;
}): RenewalPlan {
  const { region, other, budgets, now } = input;
  const otherName = other?.region ?? OTHER;
  // A lapsed Region's last demand is not demand: the survivor's target becomes the whole budget.
  // Nor does it take a part of what is free: without a lease it can grant nothing, so with no demand anywhere the
  // free part is the survivor's, not split evenly with a Region that is gone.
  const otherHolds = other !== undefined && leaseHolds(other, now, input.options?.clockBoundMs);
  const demands = { [region]: input.demand, ...(otherHolds ? { [otherName]: other.demand ?? 0 } : {}) };
  const claim = input.claim ?? ((record, budget, at) => claimOf(record, budget, at, input.options));
  const own = input.ownSnapshot;
  const used = {
    [region]: Object.fromEntries(budgets.map((b) => [b.key, snapshotInSpan(own, b.key, now - b.spanMs, 0)])),
    // What the other uses, not what it holds: its part of what is free is its own to claim at its renewal, and a
    // Region that renews more often (early) must not take it first. While its lease holds its claim only caps the
    // share (allowedShare); once lapsed, its claim (its tail) is what it may still have used.
    [otherName]: Object.fromEntries(
      budgets.map((b) => [
        b.key,
        otherHolds
          ? snapshotInSpan(
              other.snapshot,
              b.key,
              now - b.spanMs,
              input.options?.clockBoundMs ?? CLOCK_BOUND_MS,
            )
          : claim(other, b, now),
      ]),
    ),
  };
  const targets = (input.targets ?? shareTargets)(demands, budgets, input.targetFloor, used);
  const shares: Record<string, number> = {};
  for (const budget of budgets) {
    const target = targets[region]?.[budget.key] ?? 0;
    shares[budget.key] = allowedShare(target, claim(other, budget, now), budget);
  }
  const leaseUntil = now + LEASE_MS;
  return {
    shares,
    targets,
    renewedAt: now,
    leaseUntil,
    fenceAt: fenceAt({ leaseUntil }, input.options?.clockBoundMs ?? CLOCK_BOUND_MS),
  };
}

/**
 * Whether a renewal planned between regular ones (a poll, every POLL_MS) is worth writing now rather than at the
 * next RENEW_MS: for some budget, by at least EARLY_MOVE of its limit,
 *   - the plan gives this Region more than its record says, and it has demand (what the other freed);
 *   - the plan gives it less, and the other Region's target is above the other's share (the other waits for it);
 *   - this Region's target is above what the other's claim lets it have, and its demand rose past DEMAND_JUMP times
 *     what its record says (the other must see it to lower its share).
 * Each is a write the next regular renewal would make anyway: renewing sooner changes when, never what, so every
 * property of the lease rules holds. A Region that never leased renews at once.
 */
export function renewsEarly(input: {
  region: string;
  plan: Pick<RenewalPlan, 'shares' | 'targets'>;
  /** This Region's record in the item (absent: never written). */
  own: LeaseRecord | undefined;
  other: LeaseRecord | undefined;
  demand: number;
  budgets: readonly Budget[];
}): boolean {
  const { region, plan, own, other, demand, budgets } = input;
  if (!own) return true;
  const otherName = other?.region ?? OTHER;
  return budgets.some((budget) => {
    const step = Math.max(1, Math.ceil(EARLY_MOVE * budget.limit));
    const planned = plan.shares[budget.key] ?? 0;
    const recorded = own.shares[budget.key] ?? 0;
    if (demand > 0 && planned >= recorded + step) return true;
    const otherWants =
      other === undefined ? 0 : (plan.targets[otherName]?.[budget.key] ?? 0) - shareIn(other, budget);
    if (planned <= recorded - step && otherWants >= step) return true;
    const heldBack = (plan.targets[region]?.[budget.key] ?? 0) - planned;
    return heldBack >= step && demand > DEMAND_JUMP * (own.demand ?? 0);
  });
}
