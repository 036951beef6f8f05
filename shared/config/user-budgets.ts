import { isDeepStrictEqual } from 'node:util';

/**
 * Which credential sets log in as one vendor user, and what that asks of their configuration. The broker knows
 * a vendor user by the secret its credentials are in: sets that name one secret log in with one username. It
 * cannot know more at configuration time: only the refresher may read a secret (least privilege), so two
 * secrets holding one username are two users to the broker (docs/runbook.md, Choosing the quota scope: one
 * secret per vendor user).
 */

/** Full and partial secret ARNs: the name is what follows `:secret:`. */
const SECRET_ARN = /^arn:[a-z-]+:secretsmanager:[^:]*:[^:]*:secret:(.+)$/;
/** Secrets Manager ends the name in a full ARN with a dash and 6 characters of its own. */
const ARN_SUFFIX = /-[A-Za-z0-9]{6}$/;

/**
 * A secret as the broker tells secrets apart: its name (an ARN is reduced to the name it ends in). Where a
 * spelling leaves doubt (a partial ARN of a name that itself ends in 6 characters after a dash), two secrets
 * may be taken for one, which errs the safe way: one budget for two users, never two for one.
 */
export function secretIdentity(secretId: string): string {
  const name = SECRET_ARN.exec(secretId)?.[1];
  return name === undefined ? secretId : name.replace(ARN_SUFFIX, '');
}

/**
 * Per secret (secretIdentity), the smallest id among the sets of scope "user" that log in with it, as the
 * configurations checked in this process say (userBudgetIssues records them): their one budget is that set's
 * ledger item (shared/vend/ledger-key.ts), the item release N-1 kept for it alone.
 */
const budgetOwners = new Map<string, string>();

/** The set whose ledger item the sets of this secret share; undefined when no configuration named it. */
export const budgetOwnerOf = (secretId: string): string | undefined =>
  budgetOwners.get(secretIdentity(secretId));

/** What the check needs of a set, in the shared, the local and the stage configuration alike. */
export interface UserBudgetSet {
  id: string;
  quotaScope: 'token' | 'user';
  secretId: string;
  rateLimits: object;
}

export interface UserBudgetIssue {
  /** The later of the two sets, in configuration order. */
  index: number;
  field: 'quotaScope' | 'rateLimits';
  message: string;
}

/**
 * Sets that log in as one vendor user and cannot share its budget safely. With `quotaScope: "user"` they draw
 * on one ledger item (ledgerKeyFor), which is only sound when they agree on what it counts: the same scope
 * (a "token" set's grants would not be in the user's item) and the same rateLimits (the item's layout and
 * bounds come from them). Sets of scope "token" may share a secret: each token has its own budget then.
 */
export function userBudgetIssues(sets: readonly UserBudgetSet[]): UserBudgetIssue[] {
  const firstBySecret = new Map<string, UserBudgetSet>();
  const issues: UserBudgetIssue[] = [];
  sets.forEach((set, index) => {
    const identity = secretIdentity(set.secretId);
    if (set.quotaScope === 'user') {
      const owner = budgetOwners.get(identity);
      if (owner === undefined || set.id < owner) budgetOwners.set(identity, set.id);
    }
    const other = firstBySecret.get(identity);
    if (other === undefined) {
      firstBySecret.set(identity, set);
      return;
    }
    const both = `"${set.id}" and "${other.id}" log in with one secret ("${identity}"), i.e. as one vendor user`;
    if (set.quotaScope !== other.quotaScope) {
      issues.push({
        index,
        field: 'quotaScope',
        message: `${both}, but "${other.id}" counts its quota per ${other.quotaScope} and "${set.id}" per ${set.quotaScope}: give both quotaScope "user" (one budget for the user) or both "token"`,
      });
    } else if (set.quotaScope === 'user' && !isDeepStrictEqual(set.rateLimits, other.rateLimits)) {
      const a = set.rateLimits as Record<string, unknown>;
      const b = other.rateLimits as Record<string, unknown>;
      const differ = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter(
        (key) => !isDeepStrictEqual(a[key], b[key]),
      );
      issues.push({
        index,
        field: 'rateLimits',
        message: `${both}, and with quotaScope "user" both draw on the user's one budget: their rateLimits must be the same (they differ in ${differ.join(', ')})`,
      });
    }
  });
  return issues;
}
