import type { CredentialSetConfig } from '../../config/credential-sets.js';
import type { LedgerUsage } from '../../ledger/index.js';
import { health } from '../../tokens/health.js';
import type { TokenView } from '../../tokens/token-state.js';
import type { Caller } from '../access-policy.js';
import { ledgerKeyFor } from '../ledger-key.js';
import { jsonResult, type VendResult } from '../responses.js';
import type { Audit, VendServices } from '../route-context.js';

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * A consumer sees its own reservations and the shared part, not how much of theirs the other consumers used
 * (it needs none of that to pace itself); an operator of the set sees every reservation. No reservation of its
 * own: no `reservations` field.
 */
function visibleWindows(
  windows: LedgerUsage['windows'],
  caller: Caller,
  setId: string,
): LedgerUsage['windows'] {
  if (caller.operatorSetIds.has(setId)) return windows;
  return windows.map(({ reservations, ...window }) => {
    const own = reservations?.filter((r) => caller.consumers.includes(r.consumer)) ?? [];
    return own.length > 0 ? { ...window, reservations: own } : window;
  });
}

/**
 * What the ledger says of the current token: per window what is left and what was granted, and the end of a
 * vendor 429's cooldown reported by a consumer. Undefined without a token, or when the ledger cannot say (the
 * list is still worth having).
 */
async function usageOf(
  services: VendServices,
  set: CredentialSetConfig,
  token: TokenView | undefined,
): Promise<LedgerUsage | undefined> {
  if (!token || !services.ledger.usage) return undefined;
  try {
    return await services.ledger.usage(ledgerKeyFor(set, token.tokenId), set.rateLimits, set.id);
  } catch (error) {
    services.telemetry.warn('quota unknown: the ledger did not answer', {
      credentialSet: set.id,
      tokenId: token.tokenId,
      errorCode: (error as { code?: unknown })?.code ?? 'UNKNOWN',
    });
    return undefined;
  }
}

/**
 * One limit of a class as the status shows it: configured, or learned (when, whether one caller's word, whether a
 * rise adopted it or is trying it).
 */
export interface ClassLimitView {
  limit: number;
  windowSeconds: number;
  source: 'configured' | 'learned';
  learnedAt?: string;
  /** Taught by one caller only: it holds until then unless another caller reports as much. */
  provisionalUntil?: string;
  /** A rise adopted it (docs/class-limits.md, R3): the kept limit it replaced, over the same window. */
  raisedFrom?: number;
  /**
   * A rise of this kept limit under trial (R2): since `since` the class is held to `limit` per this window (a
   * learned class), and `reportedLimit` is kept in its place if the vendor serves that without a 429 (R3).
   */
  trial?: { limit: number; reportedLimit: number; since: string };
}

/**
 * Each class's limits: the configured ones and what was learned (docs/class-limits.md). A learned class with
 * nothing learned yet shows none (`learned: true`, `limits: []`): it is held to the probe. Undefined when the
 * set has no class; a class without its learned part when the ledger cannot say.
 */
async function classesOf(
  services: VendServices,
  set: CredentialSetConfig,
): Promise<Record<string, { learned: boolean; limits: ClassLimitView[] }> | undefined> {
  const names = Object.keys(set.rateLimits.classes);
  if (names.length === 0) return undefined;
  let learned: Awaited<ReturnType<NonNullable<VendServices['ledger']['learned']>>> = {};
  try {
    learned = (await services.ledger.learned?.(set.id, set.rateLimits)) ?? {};
  } catch (error) {
    services.telemetry.warn('learned class limits unknown: the ledger did not answer', {
      credentialSet: set.id,
      errorCode: (error as { code?: unknown })?.code ?? 'UNKNOWN',
    });
  }
  return Object.fromEntries(
    names.map((name) => {
      const configured = set.rateLimits.classes[name] ?? [];
      return [
        name,
        {
          learned: configured.length === 0,
          limits: [
            ...configured.map((l) => ({ ...l, source: 'configured' as const })),
            ...(learned[name] ?? []).map((l) => ({
              limit: l.limit,
              windowSeconds: l.windowSeconds,
              source: 'learned' as const,
              learnedAt: iso(l.learnedAt),
              ...(l.until === undefined ? {} : { provisionalUntil: iso(l.until) }),
              ...(l.raisedFrom === undefined ? {} : { raisedFrom: l.raisedFrom }),
              ...(l.trial === undefined ? {} : { trial: { ...l.trial, since: iso(l.trial.since) } }),
            })),
          ],
        },
      ];
    }),
  );
}

/**
 * GET /v1/credential-sets: the sets whose status this caller may read (its consumer sets and its operator
 * sets), each with its health and its current token's quota (what the operator's `token-broker status`
 * shows). No token, no token id: a consumer that wants the token asks for it (and is counted doing so).
 * The state is read fresh from the tokens table, one consistent GetItem per listed set, not from the vend
 * path's warm cache: during triage a login that failed a moment ago must show at once.
 */
export async function listCredentialSets(context: {
  caller: Caller;
  sets: CredentialSetConfig[];
  audit: Audit;
  services: VendServices;
}): Promise<VendResult> {
  const { sets, services } = context;
  const credentialSets = await Promise.all(
    sets.map(async (set) => {
      const state = await services.provider.freshState(set);
      const now = services.clock.now();
      const setHealth = health(state, now, set);
      const [usage, classes] = await Promise.all([
        usageOf(services, set, state?.current),
        classesOf(services, set),
      ]);
      return {
        id: set.id,
        environment: set.environment,
        companyRole: set.companyRole,
        health: {
          state: setHealth.state,
          expiresAt: setHealth.expiresAt ?? null,
          /** What the vendor would say is left of the current token (its clock, as measured at login). */
          expiresInSeconds: state?.current ? setHealth.validitySeconds : null,
          /** When the current token was obtained: the last successful re-login. */
          refreshedAt: state?.current ? iso(state.current.obtainedAt) : null,
          lastError: setHealth.lastError
            ? {
                code: setHealth.lastError.code,
                at: iso(setHealth.lastError.at),
                ...(setHealth.lastError.requestId ? { requestId: setHealth.lastError.requestId } : {}),
              }
            : null,
          consecutiveFailures: setHealth.consecutiveFailures,
          /** No login attempt before this (backoff after a failure, or the credentials cooldown). */
          nextAttemptAt: setHealth.nextAttemptAt === undefined ? null : iso(setHealth.nextAttemptAt),
          /** The vendor rejected the current secret version this many times in a row (the cooldown grows). */
          ...(setHealth.rejectionsOfSecretVersion === undefined
            ? {}
            : { rejectionsOfSecretVersion: setHealth.rejectionsOfSecretVersion }),
          /** A consumer reported a vendor 429: the ledger grants no permit for this token before then. */
          rateLimitedUntil: usage?.cooldownUntil === undefined ? null : iso(usage.cooldownUntil),
        },
        /** `token`: each token has its own budget; `user`: the set's tokens share one. */
        quotaScope: set.quotaScope,
        /** Per limit of the current token: what is left now and what was granted in the window. */
        quota: usage ? visibleWindows(usage.windows, context.caller, set.id) : null,
        /** Per class (only when the set has classes): its limits, configured or learned, and when learned. */
        ...(classes ? { classes } : {}),
      };
    }),
  );
  context.audit.decision = 'LISTED';
  return jsonResult(200, { credentialSets });
}
