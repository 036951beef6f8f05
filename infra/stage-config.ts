import { isDeepStrictEqual } from 'node:util';
import * as z from 'zod';
import { consumerSchema } from '../shared/config/consumers.js';
import {
  type CredentialSetInput,
  credentialSetSchema,
  describeIssues,
  rateLimitSettingsSchema,
  refreshSettingsSchema,
} from '../shared/config/credential-sets.js';
import { ConfigurationError } from '../shared/errors.js';
import { VENDOR_ENVIRONMENTS } from '../shared/vendor/types.js';

/**
 * One deployment stage (uat, prod): where it goes, which credential sets and consumers it serves, and who is
 * paged. Validated at synth so that a wrong value fails `cdk synth` with a message naming it, long before a
 * function's cold start would.
 */

/** CloudWatch Logs accepts only these retention periods (days). */
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

/** Secrets Manager's own rule for secret names. */
export const secretNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9/_+=.@-]{1,512}$/, 'a Secrets Manager secret name (letters, digits and /_+=.@-)')
  .refine((name) => !name.startsWith('arn:'), 'a secret name, not an ARN');

/**
 * A credential set as a stage declares it: the shared schema, but naming the secret by `secretName` in the
 * stage's own account and Region (the stack turns it into the ARN it grants, and the functions get it as
 * `secretId`). A deployed stage talks to the vendor over HTTPS only; loopback HTTP is for the sandbox.
 */
export const stageCredentialSetSchema = credentialSetSchema.omit({ secretId: true }).extend({
  secretName: secretNameSchema,
  vendorBaseUrl: credentialSetSchema.shape.vendorBaseUrl.refine((url) => url.startsWith('https://'), {
    message: 'must be https:// in a deployed stage',
  }),
});
export type StageCredentialSet = z.infer<typeof stageCredentialSetSchema>;

const httpsUrlSchema = z.url({ protocol: /^https$/, error: 'an https:// URL' });

export const alarmSettingsSchema = z.object({
  /** E-mail addresses subscribed to the alarm topic (each confirms its subscription once). */
  emails: z.array(z.email()).default([]),
  /** HTTPS endpoints subscribed to the alarm topic, e.g. an incident tool's SNS integration URL. */
  httpsEndpoints: z.array(httpsUrlSchema).default([]),
  /** Page when a set's token has less validity than this left: refreshes have failed for a while. */
  tokenValiditySeconds: z.number().int().positive().default(1800),
  /** Vendor-unavailable login failures in this many consecutive schedule periods page (outages are retried). */
  vendorUnavailablePeriods: z.number().int().min(1).max(12).default(3),
  /** Permit denials per 5 minutes that count as "denied" for the sustained-denials alarm. */
  permitDenialsPerPeriod: z.number().int().positive().default(100),
  /** ...in this many consecutive 5-minute periods. */
  permitDenialsPeriods: z.number().int().min(1).max(12).default(3),
  /** A function whose slowest invocation takes more than this share of its timeout pages. */
  durationShareOfTimeout: z.number().gt(0).lt(1).default(0.8),
});
export type AlarmSettings = z.infer<typeof alarmSettingsSchema>;

export const stageConfigSchema = z
  .object({
    /** Part of the stack name, e.g. `uat` → stack `TokenBroker-uat`. */
    name: z.string().regex(/^[a-z][a-z0-9-]{0,19}$/, 'lowercase letters, digits and dashes, at most 20'),
    account: z.string().regex(/^\d{12}$/, 'a 12-digit AWS account id'),
    region: z.string().regex(/^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$/, 'an AWS Region such as eu-west-1'),
    /** The vendor environment every set of this stage must belong to (UAT and Production never mix). */
    vendorEnvironment: z.enum(VENDOR_ENVIRONMENTS),
    /** Production: deletion protection on, data and logs retained when the stack goes. */
    production: z.boolean(),
    credentialSets: z.array(stageCredentialSetSchema).min(1),
    consumers: z.array(consumerSchema).min(1),
    alarms: alarmSettingsSchema,
    /** Minutes between scheduled refresher runs. */
    refreshScheduleMinutes: z.number().int().min(1).max(30).default(5),
    logRetentionDays: z
      .number()
      .refine((days) => (LOG_RETENTION_DAYS as readonly number[]).includes(days), {
        message: `one of the retention periods CloudWatch Logs accepts: ${LOG_RETENTION_DAYS.join(', ')}`,
      })
      .default(90),
    /** Where alarm descriptions point; `#anchor` is appended per alarm. */
    runbookUrl: z.string().min(1).default('docs/runbook.md'),
  })
  .superRefine((stage, ctx) => {
    const issue = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: 'custom', path, message });
    const setIds = new Set<string>();
    stage.credentialSets.forEach((set, index) => {
      if (setIds.has(set.id))
        issue(['credentialSets', index, 'id'], `duplicate credential set id "${set.id}"`);
      setIds.add(set.id);
      if (set.environment !== stage.vendorEnvironment) {
        issue(
          ['credentialSets', index, 'environment'],
          `"${set.environment}" in a stage for the vendor's "${stage.vendorEnvironment}" environment`,
        );
      }
      const { softThresholdSeconds, hardFloorSeconds } = set.refresh;
      // The soft threshold must leave room for several scheduled runs (and their retries) before the floor.
      if (softThresholdSeconds - hardFloorSeconds < 3 * stage.refreshScheduleMinutes * 60) {
        issue(
          ['credentialSets', index, 'refresh', 'softThresholdSeconds'],
          `leaves fewer than 3 scheduled runs (every ${stage.refreshScheduleMinutes} min) before the hard floor`,
        );
      }
      if (stage.alarms.tokenValiditySeconds <= hardFloorSeconds) {
        issue(['alarms', 'tokenValiditySeconds'], `must be above set "${set.id}"'s hardFloorSeconds`);
      }
      if (stage.alarms.tokenValiditySeconds >= softThresholdSeconds) {
        issue(['alarms', 'tokenValiditySeconds'], `must be below set "${set.id}"'s softThresholdSeconds`);
      }
    });
    const principals = new Set<string>();
    stage.consumers.forEach((consumer, index) => {
      if (principals.has(consumer.principalArn)) {
        issue(['consumers', index, 'principalArn'], `duplicate principal "${consumer.principalArn}"`);
      }
      principals.add(consumer.principalArn);
      consumer.credentialSets.forEach((setId, setIndex) => {
        if (!setIds.has(setId)) {
          issue(['consumers', index, 'credentialSets', setIndex], `unknown credential set "${setId}"`);
        }
      });
    });
    if (stage.alarms.emails.length + stage.alarms.httpsEndpoints.length === 0) {
      issue(['alarms'], 'needs at least one notification target (emails or httpsEndpoints)');
    }
  });

export type StageInput = z.input<typeof stageConfigSchema>;
export type StageConfig = z.infer<typeof stageConfigSchema>;

/** Validates a stage; a wrong value throws a ConfigurationError naming the stage and the field. */
export function parseStageConfig(input: StageInput): StageConfig {
  const result = stageConfigSchema.safeParse(input);
  if (!result.success) {
    const label = typeof input?.name === 'string' ? input.name : 'stage';
    throw new ConfigurationError(`invalid stage "${label}": ${describeIssues(result.error, label)}`);
  }
  return result.data;
}

const DEFAULT_REFRESH = refreshSettingsSchema.parse({});
const DEFAULT_RATE_LIMITS = rateLimitSettingsSchema.parse({});

/**
 * The credential sets as the functions read them (`CREDENTIAL_SETS`, parsed at cold start by the same
 * schema): the secret is found by its name, and settings equal to the defaults are left out, because Lambda
 * allows only 4 KB of environment per function.
 */
export function functionCredentialSets(stage: StageConfig): CredentialSetInput[] {
  return stage.credentialSets.map(({ secretName, refresh, rateLimits, ...set }) => ({
    ...set,
    secretId: secretName,
    ...(isDeepStrictEqual(refresh, DEFAULT_REFRESH) ? {} : { refresh }),
    ...(isDeepStrictEqual(rateLimits, DEFAULT_RATE_LIMITS) ? {} : { rateLimits }),
  }));
}
