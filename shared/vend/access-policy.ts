import type { ConsumerConfig } from '../config/consumers.js';
import { CREDENTIAL_SET_ID, type CredentialSetConfig } from '../config/credential-sets.js';
import type { OperatorConfig } from '../config/operators.js';
import { callerPrincipal, type PrincipalKey, rulePrincipal } from './principal.js';
import { InsufficientPermissionsError, ResourceNotFoundError } from './vend-errors.js';

/** A caller the configuration knows: the consumers and operators (rules) it matched and what they allow. */
export interface Caller {
  /** The ARN as presented (an assumed-role session ARN for roles): for logs. */
  arn: string;
  /** The principal the rules matched (a role, whatever the session): who a permit receipt belongs to. */
  principal: PrincipalKey;
  consumers: string[];
  operators: string[];
  /** The sets whose tokens, permits and reports this caller may have: its consumer rules' sets only. */
  setIds: ReadonlySet<string>;
  /** The sets whose status it may read (the list route): its consumer sets and its operator sets. */
  statusSetIds: ReadonlySet<string>;
  /** The sets an operator rule of it names: their status shows every consumer's reservation. */
  operatorSetIds: ReadonlySet<string>;
  /** The sets an operator rule of it with `refresh: true` names: it may force their re-login. */
  refreshSetIds: ReadonlySet<string>;
  /**
   * Per set it may use, the one consumer rule it is for that set: the rule holding a reservation on the set
   * (`rateLimits.reservations`; the configuration allows one per principal and set) if one of this principal's
   * rules does, else the first in configuration order. The ledger's consumer (its reservation) and the
   * `Consumer` of the permit metrics (granted, returned, denied) alike.
   */
  consumerBySet: ReadonlyMap<string, string>;
}

interface Rule {
  consumers: string[];
  operators: string[];
  setIds: Set<string>;
  statusSetIds: Set<string>;
  operatorSetIds: Set<string>;
  refreshSetIds: Set<string>;
  consumerBySet: Map<string, string>;
}

/**
 * Who may have which credential set. Built once at cold start from the consumer and operator rules. An
 * operator rule only adds sets to the status a caller may read; tokens, permits and reports need a consumer
 * rule for the set, so a principal that is both keeps its consumer rights and sees the status of both.
 *
 * Order of refusals, so that an outsider learns nothing: a caller matching no rule at all gets 403 for every
 * set id, known or not; a known caller gets 404 for an id that does not exist and 403 for a set it may not
 * use (it is one of ours, and the set ids are in its own configuration anyway).
 */
export class AccessPolicy {
  readonly #rules = new Map<PrincipalKey, Rule>();
  readonly #sets: ReadonlyMap<string, CredentialSetConfig>;

  constructor(
    sets: readonly CredentialSetConfig[],
    consumers: readonly ConsumerConfig[],
    operators: readonly OperatorConfig[] = [],
  ) {
    this.#sets = new Map(sets.map((set) => [set.id, set]));
    for (const consumer of consumers) {
      const rule = this.#ruleFor(consumer.principalArn);
      if (!rule) continue; // consumerSchema already refuses such ARNs
      rule.consumers.push(consumer.name);
      for (const setId of consumer.credentialSets) {
        const current = rule.consumerBySet.get(setId);
        // A later rule replaces the first only when it holds a reservation on the set and the first does not.
        if (
          current === undefined ||
          (this.#holdsReservation(setId, consumer.name) && !this.#holdsReservation(setId, current))
        )
          rule.consumerBySet.set(setId, consumer.name);
        rule.setIds.add(setId);
        rule.statusSetIds.add(setId);
      }
    }
    for (const operator of operators) {
      const rule = this.#ruleFor(operator.principalArn);
      if (!rule) continue; // operatorSchema already refuses such ARNs
      rule.operators.push(operator.name);
      for (const setId of operator.credentialSets ?? this.#sets.keys()) {
        rule.statusSetIds.add(setId);
        rule.operatorSetIds.add(setId);
        if (operator.refresh === true) rule.refreshSetIds.add(setId);
      }
    }
  }

  #holdsReservation(setId: string, consumer: string): boolean {
    return this.#sets.get(setId)?.rateLimits.reservations?.some((r) => r.consumer === consumer) === true;
  }

  #ruleFor(arn: string): Rule | undefined {
    const principal = rulePrincipal(arn);
    if (!principal) return undefined;
    let rule = this.#rules.get(principal.key);
    if (!rule) {
      rule = {
        consumers: [],
        operators: [],
        setIds: new Set(),
        statusSetIds: new Set(),
        operatorSetIds: new Set(),
        refreshSetIds: new Set(),
        consumerBySet: new Map(),
      };
      this.#rules.set(principal.key, rule);
    }
    return rule;
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
    return {
      arn: callerArn,
      principal: principal.key,
      consumers: rule.consumers,
      operators: rule.operators,
      setIds: rule.setIds,
      statusSetIds: rule.statusSetIds,
      operatorSetIds: rule.operatorSetIds,
      refreshSetIds: rule.refreshSetIds,
      consumerBySet: rule.consumerBySet,
    };
  }

  /**
   * The set, if this caller may use it (token, permits, reports): 404 for an unknown id, 403 for a set of
   * someone else's, and 403 for a set whose status alone the caller may read.
   */
  authorize(caller: Caller, setId: string): CredentialSetConfig {
    return this.#setFor(setId, caller.setIds, (named) =>
      caller.statusSetIds.has(setId)
        ? `this caller may read credential set ${named}'s status only (GET /v1/credential-sets)`
        : `this caller may not use credential set ${named}`,
    );
  }

  /**
   * The set, if this caller may force its re-login: an operator rule with `refresh: true` naming it. 404 for an
   * unknown id; 403 for everyone else, consumers of the set included (a consumer reports a rejected token
   * instead, which re-logs in only when the vendor refused the current one).
   */
  authorizeRefresh(caller: Caller, setId: string): CredentialSetConfig {
    return this.#setFor(
      setId,
      caller.refreshSetIds,
      (named) =>
        `this caller may not force a re-login of credential set ${named}: only an operator entry with "refresh": true may`,
    );
  }

  /** The set when `allowed` has it; 404 for an unknown id, 403 with `refusal`'s words otherwise. Both name the set. */
  #setFor(
    setId: string,
    allowed: ReadonlySet<string>,
    refusal: (named: string) => string,
  ): CredentialSetConfig {
    const set = this.#sets.get(setId);
    const named = namedSet(setId);
    if (!set) throw new ResourceNotFoundError(`no credential set ${named.words}`, named.details);
    if (!allowed.has(setId)) throw new InsufficientPermissionsError(refusal(named.words), named.details);
    return set;
  }

  /** The sets whose status this caller may read, in configuration order. */
  setsOf(caller: Caller): CredentialSetConfig[] {
    return [...this.#sets.values()].filter((set) => caller.statusSetIds.has(set.id));
  }
}

/**
 * The set a refusal is about, as the answer names it: the id from the path when it is one a set can have (the
 * configuration's rule; it is the caller's own input, so it tells nobody anything new); anything else is not
 * echoed.
 */
function namedSet(setId: string): { words: string; details: { details?: Record<string, unknown> } } {
  if (!CREDENTIAL_SET_ID.test(setId)) return { words: '(an id no set can have)', details: {} };
  return { words: `"${setId}"`, details: { details: { credentialSet: setId } } };
}
