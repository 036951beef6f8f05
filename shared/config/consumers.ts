import * as z from 'zod';
import { ConfigurationError } from '../errors.js';
import { lazySchema } from '../lazy-schema.js';
import { parseConfig } from './credential-sets.js';

/**
 * Who may have which credential set's token. A rule names an IAM role or user ARN; a caller that arrives
 * as an assumed-role session (`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`) matches the rule written for
 * `arn:aws:iam::ACCOUNT:role/ROLE`.
 */
export const principalArnSchema = lazySchema(() =>
  z
    .string()
    .regex(
      /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/[\w+=,.@/-]+$/,
      'an IAM role or user ARN, e.g. arn:aws:iam::123456789012:role/portfolio-service',
    ),
);

/** The name of a consumer or operator rule, for logs. */
export const ruleNameSchema = lazySchema(() => z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/));

export const consumerSchema = lazySchema(() =>
  z.strictObject({
    /** A human name for logs, e.g. `portfolio-service`. */
    name: ruleNameSchema,
    principalArn: principalArnSchema,
    credentialSets: z.array(z.string().min(1)).min(1),
  }),
);
export type ConsumerConfig = z.infer<typeof consumerSchema>;

export const consumersSchema = lazySchema(() => z.array(consumerSchema));

/** Parses the consumers once, at cold start; every set a consumer names must exist. */
export function parseConsumers(
  input: unknown,
  knownSetIds: readonly string[],
  source = 'consumers',
): ConsumerConfig[] {
  const consumers = parseConfig(consumersSchema, input, source);
  requireKnownSets(consumers, knownSetIds, source);
  return consumers;
}

/** Every set a rule (consumer or operator) names must exist; the first that does not is named. */
export function requireKnownSets(
  rules: readonly { credentialSets?: readonly string[] }[],
  knownSetIds: readonly string[],
  source: string,
): void {
  const known = new Set(knownSetIds);
  rules.forEach((rule, index) => {
    rule.credentialSets?.forEach((setId, setIndex) => {
      if (!known.has(setId)) {
        throw new ConfigurationError(
          `invalid configuration: ${source}[${index}].credentialSets[${setIndex}]: unknown credential set "${setId}"`,
        );
      }
    });
  });
}

/**
 * Each reservation (`rateLimits.reservations`) names a consumer of its set, and no two reserved consumers of a
 * set share a principal (a caller is one consumer to the ledger): the first wrong one is named.
 */
export function requireReservedConsumers(
  sets: readonly { id: string; rateLimits: { reservations?: readonly { consumer: string }[] | undefined } }[],
  consumers: readonly ConsumerConfig[],
  source: string,
): void {
  sets.forEach((set, index) => {
    const principals = new Map<string, string>();
    set.rateLimits.reservations?.forEach((reservation, r) => {
      const field = `${source}[${index}].rateLimits.reservations[${r}].consumer`;
      const consumer = consumers.find(
        (c) => c.name === reservation.consumer && c.credentialSets.includes(set.id),
      );
      if (!consumer)
        throw new ConfigurationError(
          `invalid configuration: ${field}: "${reservation.consumer}" is not a consumer of credential set "${set.id}"`,
        );
      const other = principals.get(consumer.principalArn);
      if (other !== undefined)
        throw new ConfigurationError(
          `invalid configuration: ${field}: "${reservation.consumer}" has the principal of "${other}", also reserved in "${set.id}": one reservation per principal`,
        );
      principals.set(consumer.principalArn, consumer.name);
    });
  });
}
