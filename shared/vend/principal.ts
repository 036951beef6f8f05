/**
 * IAM principals as the Function URL presents them, and as the consumer rules name them.
 *
 * A role caller never arrives as its role ARN but as its session: `arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`,
 * and that ARN drops the role's path. A rule names the role: `arn:aws:iam::ACCOUNT:role/ROLE`, or with a path
 * `arn:aws:iam::ACCOUNT:role/team/ROLE`. Both reduce to the same key — partition, account and role name — and
 * that is safe because a role name is unique within an account whatever its path (IAM refuses a second role of
 * the same name under another path). The session name is ignored: any session of the role is the role.
 * A user arrives as its user ARN, path included, and must match its rule exactly.
 * Comparison is exact (case-sensitive): a rule spelled in another case fails closed with 403, never opens.
 */
export type PrincipalKey = string;

const ASSUMED_ROLE = /^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role\/([\w+=,.@-]+)\/[\w+=,.@-]+$/;
const IAM_ROLE = /^arn:(aws[a-z-]*):iam::(\d{12}):role\/(?:[\w+=,.@-]+\/)*([\w+=,.@-]+)$/;
const IAM_USER = /^arn:(aws[a-z-]*):iam::(\d{12}):user\/((?:[\w+=,.@-]+\/)*[\w+=,.@-]+)$/;

export interface Principal {
  key: PrincipalKey;
  accountId: string;
}

const roleKey = (partition: string, accountId: string, name: string): PrincipalKey =>
  `role|${partition}|${accountId}|${name}`;
const userKey = (partition: string, accountId: string, pathAndName: string): PrincipalKey =>
  `user|${partition}|${accountId}|${pathAndName}`;

/** The key of a caller's ARN (assumed-role session, role or user); undefined for anything else (root, federated…). */
export function callerPrincipal(arn: string): Principal | undefined {
  if (arn.length > 2048) return undefined;
  const session = ASSUMED_ROLE.exec(arn) ?? IAM_ROLE.exec(arn);
  if (session) {
    const [, partition = '', accountId = '', name = ''] = session;
    return { key: roleKey(partition, accountId, name), accountId };
  }
  const user = IAM_USER.exec(arn);
  if (user) {
    const [, partition = '', accountId = '', pathAndName = ''] = user;
    return { key: userKey(partition, accountId, pathAndName), accountId };
  }
  return undefined;
}

/** The key of a rule's ARN (an IAM role or user, as validated by consumerSchema). */
export function rulePrincipal(arn: string): Principal | undefined {
  const role = IAM_ROLE.exec(arn);
  if (role) {
    const [, partition = '', accountId = '', name = ''] = role;
    return { key: roleKey(partition, accountId, name), accountId };
  }
  return callerPrincipal(arn);
}
