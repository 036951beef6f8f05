import * as z from 'zod';
import { ConfigurationError } from '../errors.js';
import { lazySchema } from '../lazy-schema.js';
import { principalArnSchema, requireKnownSets, ruleNameSchema } from './consumers.js';
import { parseConfig } from './credential-sets.js';

/**
 * Who may read the sets' status (GET /v1/credential-sets), and with `refresh` force a re-login: on-call
 * engineers, dashboards. An operator never gets a token, a permit or a report accepted; a principal that is also a consumer keeps its
 * consumer rights on the consumer's sets and sees the status of both. Without `credentialSets`, every set of
 * the stage (the usual case for on-call); with them, only those.
 */
export const operatorSchema = lazySchema(() =>
  z.strictObject({
    /** A human name for logs, e.g. `oncall`. */
    name: ruleNameSchema,
    principalArn: principalArnSchema,
    credentialSets: z.array(z.string().min(1)).min(1).optional(),
    /**
     * May force a re-login of its sets (`POST /v1/credential-sets/{id}/refresh`, `token-broker refresh`): the
     * on-call role's way out of a token the vendor stopped honouring. Default false: status only.
     */
    refresh: z.boolean().optional(),
  }),
);
export type OperatorConfig = z.infer<typeof operatorSchema>;

export const operatorsSchema = lazySchema(() => z.array(operatorSchema));

/**
 * Parses the operators once, at cold start (absent: none); every set an operator names must exist, and each
 * principal is named once.
 */
export function parseOperators(
  input: unknown,
  knownSetIds: readonly string[],
  source = 'operators',
): OperatorConfig[] {
  const operators = parseConfig(operatorsSchema, input ?? [], source);
  const seen = new Set<string>();
  operators.forEach((operator, index) => {
    if (seen.has(operator.principalArn)) {
      throw new ConfigurationError(
        `invalid configuration: ${source}[${index}].principalArn: duplicate principal "${operator.principalArn}"`,
      );
    }
    seen.add(operator.principalArn);
  });
  requireKnownSets(operators, knownSetIds, source);
  return operators;
}
