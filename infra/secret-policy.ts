import { isDeepStrictEqual } from 'node:util';
import { refresherRoleName } from './role-names.js';
import type { StageConfig } from './stage-config.js';

/**
 * The resource policy every vendor secret of a stage carries, and the refresher role's name it depends on.
 * The secrets are not in the stack (operators create them, docs/deploying.md step 2, before the first deploy),
 * so everything here is computed offline from the stage alone: the stack names the refresher's role with
 * `refresherRoleName` (role-names.ts), and `token-broker put-credentials`, `check-config --secrets` and
 * `secret-policy` build the same document with `secretResourcePolicy`. No AWS SDK or CDK import: the CLI loads
 * this.
 */

/** The ARN partition of a Region (`aws`, `aws-cn`, `aws-us-gov`, `aws-iso`, `aws-iso-b`). */
export function partitionOf(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  if (region.startsWith('us-isob-')) return 'aws-iso-b';
  if (region.startsWith('us-iso-')) return 'aws-iso';
  return 'aws';
}

/** The refresher role's ARN as IAM reports it in `aws:PrincipalArn` (the role has no path). */
export function refresherRoleArn(stage: Pick<StageConfig, 'name' | 'account' | 'region'>): string {
  return `arn:${partitionOf(stage.region)}:iam::${stage.account}:role/${refresherRoleName(stage.name)}`;
}

/** A two-Region stage's peer refresher role (role-names.ts), which reads the secrets' replicas. */
export function peerRefresherRoleArn(
  stage: Pick<StageConfig, 'name' | 'account' | 'region'>,
  peerRegion: string,
): string {
  return `arn:${partitionOf(stage.region)}:iam::${stage.account}:role/${refresherRoleName(stage.name, peerRegion)}`;
}

/**
 * Who may read a secret's value: the refresher's role (and in a two-Region stage the peer's refresher, which
 * reads the replica: a replica carries its primary's policy), then the stage's break-glass principals.
 */
export function secretReaderArns(
  stage: Pick<StageConfig, 'name' | 'account' | 'region' | 'breakGlassPrincipals'> &
    Partial<Pick<StageConfig, 'regions'>>,
): string[] {
  const peer = stage.regions ? [peerRefresherRoleArn(stage, stage.regions.peer)] : [];
  return [refresherRoleArn(stage), ...peer, ...stage.breakGlassPrincipals];
}

/**
 * Every action that hands out a secret's value. BatchGetSecretValue is not listed: it authorizes each secret
 * through GetSecretValue (the caller needs secretsmanager:GetSecretValue on every secret it returns), so this
 * Deny stops it too. Rotation and replication do not return the value to their caller; a rotation function
 * reads it with GetSecretValue under its own role (denied here), and a replica carries this same policy.
 */
export const SECRET_VALUE_ACTIONS = ['secretsmanager:GetSecretValue'] as const;

export interface PolicyDocument {
  Version: string;
  Statement: Record<string, unknown>[];
}

/**
 * One Deny: nobody but the readers gets the value. A Deny-unless rather than an Allow naming the readers:
 * - an explicit Deny beats every Allow, so an identity policy in the account granting GetSecretValue on `*`
 *   (an admin role, a CI role, a broad read-only policy) no longer reaches these secrets — an Allow in the
 *   resource policy would add readers, never remove any;
 * - the readers are compared by `aws:PrincipalArn`, a string: it may name the refresher role before the stack
 *   has created it (a Principal element naming a missing role is refused by PutResourcePolicy), and it keeps
 *   matching after the role is deleted and created again (IAM rewrites a Principal ARN to the role's unique
 *   id when the policy is saved, so an Allow would silently stop matching the new role);
 * - a caller without `aws:PrincipalArn` (a service principal) does not satisfy the condition and is denied.
 * Everything else (PutSecretValue, PutResourcePolicy, DescribeSecret, …) is left to IAM, so the operators who
 * run `token-broker put-credentials` keep managing the secret. The policy grants nothing: the refresher reads
 * through its identity policy (infra/least-privilege.ts), and `BlockPublicPolicy` has nothing to object to.
 */
export function secretResourcePolicy(
  stage: Pick<StageConfig, 'name' | 'account' | 'region' | 'breakGlassPrincipals'> &
    Partial<Pick<StageConfig, 'regions'>>,
): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'OnlyTheRefresherAndBreakGlassReadTheValue',
        Effect: 'Deny',
        Principal: '*',
        Action: [...SECRET_VALUE_ACTIONS],
        Resource: '*',
        Condition: { StringNotEquals: { 'aws:PrincipalArn': secretReaderArns(stage) } },
      },
    ],
  };
}

/** A policy as text, as `put-resource-policy --resource-policy file://…` and the SDK take it. */
export const policyText = (policy: PolicyDocument): string => JSON.stringify(policy, null, 2);

/**
 * The same meaning written differently counts as the same: Secrets Manager may hand a policy back with a
 * one-element list as a plain string, `Principal: "*"` as `{"AWS": "*"}`, lists and statements in another
 * order, or another Sid. Anything else (another reader, another action, another effect, an extra statement) differs.
 */
export function sameSecretPolicy(actual: unknown, expected: PolicyDocument): boolean {
  return isDeepStrictEqual(normalize(actual), normalize(expected));
}

function normalize(value: unknown, key?: string): unknown {
  if (Array.isArray(value)) {
    const items = value.map((item) => normalize(item));
    // Statement order and the order of actions, principals and condition values carry no meaning.
    return items.map((item) => JSON.stringify(item)).sort();
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (key === 'Principal' && entries.length === 1 && entries[0]?.[0] === 'AWS') {
      return normalize(entries[0][1], key);
    }
    // A statement's Sid is a label, not a meaning.
    return Object.fromEntries(
      entries
        .filter(([k]) => k !== 'Sid')
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, normalize(v, k)]),
    );
  }
  // A single value and a list of that one value mean the same (except for Version and Effect).
  if (typeof value === 'string' && key !== undefined && key !== 'Version' && key !== 'Effect') {
    return [JSON.stringify(value)];
  }
  return value;
}
