import type { RateLimitSettings } from '../../config/rate-limits.js';
import { InvalidLedgerRequestError, InvalidPermitCountError, UnknownPermitClassError } from '../errors.js';
import { PROBE_RETRY_MS } from '../learned-limits.js';
import { type AcquireOutcome, acquire, type LedgerState, leftAt, stateAt } from '../ledger-state.js';
import { isProbing, planFor } from '../limit-plan.js';
import { consumerTag, issueReceipt, newReceiptId, receiptTtlMs } from '../receipts.js';
import { heldPlan, NO_SHARE } from '../region-share.js';
import { GENERAL_SCOPE, type LimitPlan, ringsFor } from '../ring-plan.js';
import type { PermitDecision } from '../types.js';
import type { Applied, At, Outcome } from './outcome.js';

/**
 * A denial that no wait on this share can end (the ring is held below the ask, or fenced to its floor): ask again
 * after this, when a renewed lease may have brought a share (the lease renewer runs every 10 s).
 */
export const SHARE_RETRY_MS = 10_000;

export interface GrantInput {
  /** The plan of the request: the settings', with the learned classes' rings as the set's view says. */
  plan: LimitPlan;
  /** The learned view's version (0: none, or the plan has no learned class). */
  version: number;
  /** When the view next changes by itself (a provisional limit ends), and the plan then (H2: honest waits). */
  next?: { at: number; plan: LimitPlan } | undefined;
  /** The plan has learned classes and the request names its set: grants are stamped with the view's version. */
  learning: boolean;
  /** The view was read again after a stale-view outcome: decided on it whatever the item says. */
  refreshed: boolean;
  /** The ledger key (token id, or the set's key when the quota is counted per user). */
  key: string;
  count: number;
  cls: string | undefined;
  /** The reserved consumer of the plan the caller is, if any. */
  consumer: string | undefined;
  /** The most one grant can ever give it (largestGrant): told in the decision, granted or not. */
  maxCount: number;
  /** callerTag of the caller (in the receipt). */
  caller: string;
  /** One Region's ledger of two (region-share.ts). */
  regional: boolean;
  /** A denial's retry hint is spread over up to this many ms, by `random` (so that waiters do not all return at once). */
  spreadMs: number;
  random: () => number;
}

type GrantOutcome = Extract<Outcome, { kind: 'decided' } | { kind: 'stale-view' }>;

/**
 * Grant (acquire): `count` permits of `cls` if every ring the permit counts against has room for them in every span
 * (ledger-state.ts acquire), with a signed receipt; else a denial with the earliest moment the ask can fit.
 */
export function grant(state: LedgerState, input: GrantInput, { g, now }: At): Applied<GrantOutcome> {
  const { plan, version, learning, refreshed, key, count, cls, consumer, caller } = input;
  if (learning && !refreshed && state.learnedVersion > version)
    return { change: 'none', outcome: { kind: 'stale-view' } };
  const held = heldBy(plan, state, g, input.regional);
  const outcome = acquire(state, held, g, count, cls, consumer, key);
  if (!outcome.granted)
    return {
      change: 'none',
      outcome: { kind: 'decided', decision: denial(state, input, outcome, { g, now }) },
    };
  // The item's grants are from this view on: a process on an older one reads it first (stale-view).
  const stamps = learning && version > state.learnedVersion;
  if (stamps) state.learnedVersion = version;
  const id = newReceiptId(g + receiptTtlMs(plan), caller, state.spent);
  const { split, effect, ...granted } = outcome;
  const receipt = issueReceipt(state.secret as string, {
    key,
    cls,
    count,
    grantedAt: g,
    caller,
    id,
    ...(split ? { consumer: consumer === undefined ? '' : consumerTag(consumer), split } : {}),
  });
  const decision: PermitDecision = {
    ...granted,
    receipt,
    available: availableTo(state, held, g, cls, consumer),
    maxCount: input.maxCount,
  };
  // Told to the write loop: grants added to rings alone may go as head additions (I6); anything more, in full.
  const change = effect.rewrote || stamps ? 'other' : { grants: effect.recorded };
  return { change, outcome: { kind: 'decided', decision } };
}

/** The denial of an ask that did not fit: when to ask again, and what is available now. */
function denial(
  state: LedgerState,
  input: GrantInput,
  outcome: Extract<AcquireOutcome, { granted: false }>,
  { g, now }: At,
): PermitDecision {
  const { plan, next, count, cls, consumer, key } = input;
  // A class still on its probe learns from the answer to the request the probe let through: the next ask
  // may find it learned, so no one is told to wait out the probe's whole span (PROBE_RETRY_MS).
  const probing = cls !== undefined && outcome.reason === 'QUOTA' && isProbing(plan, cls);
  // Held below the ask by the share (or fenced to the floor): until a renewal may change it.
  let fit = Number.isFinite(outcome.retryAt) ? outcome.retryAt : now + SHARE_RETRY_MS;
  // H2: a provisional limit that ends before then frees the ask when the class's other limits allow it.
  if (next && next.at < fit) {
    const then = acquire(
      stateAt(state, g, next.plan.marginMs),
      heldBy(next.plan, state, g, input.regional),
      g,
      count,
      cls,
      consumer,
      key,
    );
    fit = Math.min(fit, then.granted ? next.at : Math.max(next.at, then.retryAt));
  }
  const retryAt = probing ? Math.min(fit, now + PROBE_RETRY_MS) : fit;
  const retryAfterMs = Math.max(1, retryAt - now + Math.floor(input.random() * input.spreadMs));
  return {
    granted: false,
    retryAfterSeconds: Math.ceil(retryAfterMs / 1000),
    retryAfterMs,
    reason: outcome.reason,
    remaining: outcome.remaining,
    available: availableTo(state, heldBy(plan, state, g, input.regional), g, cls, consumer),
    maxCount: input.maxCount,
  };
}

/**
 * A share a one-Region ledger (`regional` false) no longer holds: its fence passed, so no renewer keeps it (the
 * stage went back to one Region, docs/deploying.md). A regional ledger fences itself to its floor instead.
 */
export const shareLapsed = (state: LedgerState, g: number, regional: boolean): boolean =>
  !regional && state.share !== undefined && g >= state.share.fenceAt;

/** The plan `state`'s share holds grants to at g (region-share.ts); without Regions, `plan` itself. */
export function heldBy(plan: LimitPlan, state: LedgerState, g: number, regional: boolean): LimitPlan {
  if (regional) return heldPlan(plan, state.share ?? NO_SHARE, g);
  // No share held (none, or lapsed): the plan itself, as heldPlan would answer.
  if (state.share === undefined || shareLapsed(state, g, regional)) return plan;
  return heldPlan(plan, state.share, g);
}

/**
 * The most one grant of `cls` could give `consumer` (its configured name if it holds a reservation) at g: the
 * smallest of what is left of each limit that applies, where a window with reservations holds for it only the
 * shared part's room plus its own reservation's room (ReservedWindow: a grant is checked against those, not the
 * general ring, whose `remaining` also counts the other consumers' reservations). 0 during a cooldown, lowered
 * by vendor caps (leftAt). A consumer sizes its next ask by it: a larger one is denied whole.
 */
function availableTo(
  state: LedgerState,
  plan: LimitPlan,
  g: number,
  cls: string | undefined,
  consumer: string | undefined,
): number {
  return Math.min(
    ...ringsFor(plan, cls).map((spec) => {
      const left = leftAt(state, spec, g, spec.scope === GENERAL_SCOPE ? undefined : spec.scope);
      const window = plan.reserved.get(spec.key);
      if (!window) return left;
      const own = consumer === undefined ? undefined : window.reserved.get(consumer);
      const parts = leftAt(state, window.shared, g, undefined) + (own ? leftAt(state, own, g, undefined) : 0);
      // The general ring as well: for a span after the reservations changed, grants are checked against it too.
      return Math.min(left, parts);
    }),
  );
}

/**
 * A permit's request checked against its plan, and every request's token id (validation.ts has the give-back's
 * and the feedback's checks), before anything is read or written. The vend API maps the errors' codes to 400s.
 * Messages never echo a token id: a caller may have sent the token itself by mistake.
 */
const TOKEN_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** A class name that may be echoed in a message (limit-plan's own names are checked at configuration). */
const REQUESTED_CLASS = /^[a-z][a-z0-9-]{0,62}$/;

export function checkTokenId(tokenId: unknown): string {
  if (typeof tokenId !== 'string' || !TOKEN_ID.test(tokenId))
    throw new InvalidLedgerRequestError('tokenId must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -');
  return tokenId;
}

export function checkClass(plan: LimitPlan, cls: unknown): string | undefined {
  if (cls === undefined) return undefined;
  if (typeof cls === 'string' && plan.classes.has(cls)) return cls;
  const known = [...plan.classes.keys()].join(', ') || 'none';
  const named = typeof cls === 'string' && REQUESTED_CLASS.test(cls) ? ` "${cls}"` : '';
  throw new UnknownPermitClassError(`unknown permit class${named}; this credential set has: ${known}`);
}

function checkCount(plan: LimitPlan, cls: string | undefined, count: unknown): number {
  const max = Math.min(...ringsFor(plan, cls).map((spec) => spec.limit));
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > max)
    throw new InvalidPermitCountError(`count must be an integer from 1 to ${max}`);
  return count;
}

export interface CheckedPermit {
  tokenId: string;
  plan: LimitPlan;
  count: number;
  cls: string | undefined;
}

/** `plan`: the plan to check against (with the learned classes' rings as learned); default the settings'. */
export function checkPermit(
  request: {
    tokenId: unknown;
    count: unknown;
    class?: unknown;
    limits: RateLimitSettings;
  },
  plan: LimitPlan = planFor(request.limits),
): CheckedPermit {
  const tokenId = checkTokenId(request?.tokenId);
  const cls = checkClass(plan, request.class);
  return { tokenId, plan, cls, count: checkCount(plan, cls, request.count) };
}
