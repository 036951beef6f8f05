import type { ConsumerConfig } from '../config/consumers.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import { callerPrincipal, type PrincipalKey, rulePrincipal } from './principal.js';
import { InsufficientPermissionsError, ResourceNotFoundError } from './vend-errors.js';

/** A caller the configuration knows: the consumers (rules) it matched and every set they allow. */
export interface Caller {
  /** The ARN as presented (an assumed-role session ARN for roles): for logs. */
  arn: string;
  /** The principal the rules matched (a role, whatever the session): who a permit receipt belongs to. */
  principal: PrincipalKey;
  consumers: string[];
  setIds: ReadonlySet<string>;
}

/**
 * Who may have which credential set. Built once at cold start from the consumer rules.
 *
 * Order of refusals, so that an outsider learns nothing: a caller matching no rule at all gets 403 for every
 * set id, known or not; a known caller gets 404 for an id that does not exist and 403 for a set it may not
 * use (it is one of ours, and the set ids are in its own configuration anyway).
 */
export class AccessPolicy {
  readonly #rules = new Map<PrincipalKey, { consumers: string[]; setIds: Set<string> }>();
  readonly #sets: ReadonlyMap<string, CredentialSetConfig>;

  constructor(sets: readonly CredentialSetConfig[], consumers: readonly ConsumerConfig[]) {
    this.#sets = new Map(sets.map((set) => [set.id, set]));
    for (const consumer of consumers) {
      const principal = rulePrincipal(consumer.principalArn);
      if (!principal) continue; // consumerSchema already refuses such ARNs
      const rule = this.#rules.get(principal.key) ?? { consumers: [], setIds: new Set<string>() };
      rule.consumers.push(consumer.name);
      for (const setId of consumer.credentialSets) rule.setIds.add(setId);
      this.#rules.set(principal.key, rule);
    }
  }

  /** The caller behind a SigV4-verified ARN; 403 when no rule names it. */
  identify(callerArn: string | undefined, callerAccountId: string | undefined): Caller {
    const principal = callerArn === undefined ? undefined : callerPrincipal(callerArn);
    // The account Lambda reports must be the one in the ARN; anything else is not a caller we understand.
    const rule =
      principal && (callerAccountId === undefined || callerAccountId === principal.accountId)
        ? this.#rules.get(principal.key)
        : undefined;
    if (!callerArn || !rule || !principal)
      throw new InsufficientPermissionsError('this caller may not use the token broker');
    return { arn: callerArn, principal: principal.key, consumers: rule.consumers, setIds: rule.setIds };
  }

  /** The set, if this caller may use it: 404 for an unknown id, 403 for a set of someone else's. */
  authorize(caller: Caller, setId: string): CredentialSetConfig {
    const set = this.#sets.get(setId);
    if (!set) throw new ResourceNotFoundError('no such credential set');
    if (!caller.setIds.has(setId)) {
      throw new InsufficientPermissionsError('this caller may not use this credential set');
    }
    return set;
  }

  /** The sets this caller may use, in configuration order. */
  setsOf(caller: Caller): CredentialSetConfig[] {
    return [...this.#sets.values()].filter((set) => caller.setIds.has(set.id));
  }
}
