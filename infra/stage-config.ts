import * as z from 'zod';
import { type BrokerConfigDocument, brokerConfigDocument } from '../shared/config/broker-config.js';
import { consumerSchema, principalArnSchema } from '../shared/config/consumers.js';
import { credentialSetSchema, describeIssues } from '../shared/config/credential-sets.js';
import { operatorSchema } from '../shared/config/operators.js';
import { unknownKeysError } from '../shared/config/unknown-keys.js';
import { userBudgetIssues } from '../shared/config/user-budgets.js';
import { ConfigurationError } from '../shared/errors.js';
import { VENDOR_ENVIRONMENTS } from '../shared/vendor-client/types.js';
import { regionsIssues, regionsSchema } from './mrsc-regions.js';
import { refresherRoleName } from './role-names.js';
import { REPOSITORY_RUNBOOK_URL } from './runbook.js';

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

export const alarmSettingsSchema = z.strictObject({
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
  /**
   * Vend's p99 duration (ms, per 5 minutes) that pages and rolls a deployment back. A warm request takes tens
   * of ms; only the rare wait for an on-demand re-login takes seconds. Must stay below the near-timeout alarm
   * (checked when the stack is built, which knows the timeout).
   */
  vendLatencyP99Ms: z.number().int().min(100).max(60_000).default(5000),
  /** Vend 5xx answers of one error code per 5 minutes that page and roll a deployment back. */
  vendServerErrorsPerPeriod: z.number().int().min(1).max(10_000).default(1),
});
export type AlarmSettings = z.infer<typeof alarmSettingsSchema>;

/** CodeDeploy's predefined Lambda deployment configurations (names as in aws-cdk-lib's LambdaDeploymentConfig). */
export const VEND_DEPLOYMENTS = [
  'CANARY_10PERCENT_5MINUTES',
  'CANARY_10PERCENT_10MINUTES',
  'CANARY_10PERCENT_15MINUTES',
  'CANARY_10PERCENT_30MINUTES',
  'LINEAR_10PERCENT_EVERY_1MINUTE',
  'LINEAR_10PERCENT_EVERY_2MINUTES',
  'LINEAR_10PERCENT_EVERY_3MINUTES',
  'LINEAR_10PERCENT_EVERY_10MINUTES',
  'ALL_AT_ONCE',
] as const;
export type VendDeployment = (typeof VEND_DEPLOYMENTS)[number];

export const rolloutSettingsSchema = z.strictObject({
  /**
   * How CodeDeploy moves vend traffic to a new version. The default keeps 10 % on the new version for 10
   * minutes: the rollback alarms use 5-minute periods, so at least one whole period of canary traffic is
   * judged before everyone gets it (5 minutes may end before the first period is). ALL_AT_ONCE only outside
   * production.
   */
  vendDeployment: z.enum(VEND_DEPLOYMENTS).default('CANARY_10PERCENT_10MINUTES'),
  /**
   * Reserved concurrency of the vend function, a cap on its instances (and a guarantee of them); unset: vend
   * shares the account's unreserved pool. Lambda keeps at least 100 of an account's concurrency unreserved.
   */
  vendReservedConcurrency: z.number().int().min(1).max(1000).optional(),
});

/**
 * Where alarm descriptions point: the runbook as a page of the Git host, absolute so that a pager or an e-mail
 * can open it; `#anchor` is appended per alarm, so the URL has none of its own.
 */
const runbookUrlSchema = z
  .url({ protocol: /^https$/, error: 'an absolute https:// URL' })
  .refine((url) => !url.includes('#'), 'no #fragment: each alarm appends its own section');

/**
 * Who may reach the Function URL at all (lambda:InvokeFunctionUrl); the broker's own per-set rules
 * (consumers, operators) then decide what each caller gets, and refuse everyone else with 403.
 */
export const urlAccessSchema = z.strictObject({
  /**
   * The AWS Organization (`o-…`) of every consumer and operator account: the URL is granted to the
   * organization by one `aws:PrincipalOrgID` condition, whatever the number of accounts. Unset: the URL is
   * granted to each account that has a consumer or operator, two policy statements per account.
   */
  organizationId: z
    .string()
    .regex(/^o-[a-z0-9]{10,32}$/, 'an AWS Organizations id, e.g. o-a1b2c3d4e5')
    .optional(),
});

/**
 * Accounts granted the Function URL one by one. Lambda's resource policy holds 20 KB; each account takes two
 * statements (lambda:InvokeFunctionUrl, and lambda:InvokeFunction through the URL) of about 400 bytes each, so
 * 20 accounts stay near 16 KB with room for CloudFormation's own. More accounts: grant the organization.
 */
export const MAX_URL_ACCOUNTS = 20;

/**
 * The configuration document the vend function reads at cold start (broker-config.json) grows with the
 * consumers (about 140 bytes each); this bound keeps its cold start measured and small
 * (`npm run bench -- config-scale`: 500 consumers and 100 sets are about 150 KB).
 */
export const MAX_CONFIG_DOCUMENT_BYTES = 1024 * 1024;

/**
 * Credential sets per stage. The bound is the refresher's: a scheduled run checks every set and logs in those
 * that are due, REFRESH_CONCURRENCY at a time, within one schedule period; and the per-set alarms turn into one
 * alarm per kind across all sets beyond a few dozen sets (infra/constructs/broker-alarms.ts).
 */
export const MAX_CREDENTIAL_SETS = 100;

export const stageConfigSchema = z
  .strictObject({
    /** Part of the stack name, e.g. `uat` → stack `TokenBroker-uat`. */
    name: z.string().regex(/^[a-z][a-z0-9-]{0,19}$/, 'lowercase letters, digits and dashes, at most 20'),
    account: z.string().regex(/^\d{12}$/, 'a 12-digit AWS account id'),
    region: z.string().regex(/^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$/, 'an AWS Region such as eu-west-1'),
    /** The vendor environment every set of this stage must belong to (UAT and Production never mix). */
    vendorEnvironment: z.enum(VENDOR_ENVIRONMENTS),
    /** Production: deletion protection on, data and logs retained when the stack goes. Required with prod. */
    production: z.boolean(),
    credentialSets: z.array(stageCredentialSetSchema).min(1).max(MAX_CREDENTIAL_SETS),
    consumers: z.array(consumerSchema).min(1),
    /** Principals that may read the sets' status (`token-broker status`) and nothing else: triage without tokens. */
    operators: z.array(operatorSchema).default([]),
    /**
     * IAM roles or users of the stage's account that may read the vendor secrets besides the refresher (the
     * secrets' resource policy denies everyone else, infra/secret-policy.ts). A role is named by its ARN with
     * its path, as IAM reports it in `aws:PrincipalArn`.
     */
    breakGlassPrincipals: z.array(principalArnSchema).default([]),
    alarms: alarmSettingsSchema,
    /** Minutes between scheduled refresher runs. */
    refreshScheduleMinutes: z.number().int().min(1).max(30).default(5),
    logRetentionDays: z
      .number()
      .refine((days) => (LOG_RETENTION_DAYS as readonly number[]).includes(days), {
        message: `one of the retention periods CloudWatch Logs accepts: ${LOG_RETENTION_DAYS.join(', ')}`,
      })
      .default(90),
    /**
     * Where alarm descriptions point (https://, `#anchor` appended per alarm). Required for production stages;
     * other stages default to this repository's runbook on the Git host.
     */
    runbookUrl: runbookUrlSchema.optional(),
    /** Who may reach the Function URL (the broker's own rules then decide what each caller gets). */
    urlAccess: urlAccessSchema.prefault({}),
    /** How new vend versions reach consumers, and the functions' concurrency. */
    rollout: rolloutSettingsSchema.prefault({}),
    /**
     * Two Regions (docs/deploying.md, Two Regions): a serving stack in `home` (the stage's Region) and in
     * `peer`, and the lease table strongly consistent across both with a `witness`. Unset: one Region, as before.
     */
    regions: regionsSchema.optional(),
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
    // Sets of one secret are one vendor user: with quotaScope "user", one budget (ledgerKeyFor).
    const budgets = userBudgetIssues(
      stage.credentialSets.map((set) => ({ ...set, secretId: set.secretName })),
    );
    for (const { index, field, message } of budgets) issue(['credentialSets', index, field], message);
    // Consumers and operators: each principal once per list, and only sets the stage has.
    const checkRules = (
      key: 'consumers' | 'operators',
      rules: readonly { principalArn: string; credentialSets?: readonly string[] }[],
    ) => {
      const principals = new Set<string>();
      rules.forEach((rule, index) => {
        if (principals.has(rule.principalArn)) {
          issue([key, index, 'principalArn'], `duplicate principal "${rule.principalArn}"`);
        }
        principals.add(rule.principalArn);
        rule.credentialSets?.forEach((setId, setIndex) => {
          if (!setIds.has(setId)) {
            issue([key, index, 'credentialSets', setIndex], `unknown credential set "${setId}"`);
          }
        });
      });
    };
    checkRules('consumers', stage.consumers);
    // A reservation holds a share of a set's quota for one of the set's consumers.
    stage.credentialSets.forEach((set, index) => {
      set.rateLimits.reservations?.forEach((reservation, r) => {
        if (
          !stage.consumers.some((c) => c.name === reservation.consumer && c.credentialSets.includes(set.id))
        )
          issue(
            ['credentialSets', index, 'rateLimits', 'reservations', r, 'consumer'],
            `"${reservation.consumer}" is not a consumer of credential set "${set.id}"`,
          );
        // Where a reservation holds in a two-Region stage: one of its Regions; nothing to say in one Region.
        const { region } = reservation;
        if (region !== undefined && region !== stage.regions?.home && region !== stage.regions?.peer)
          issue(
            ['credentialSets', index, 'rateLimits', 'reservations', r, 'region'],
            stage.regions
              ? `"${region}" is neither regions.home (${stage.regions.home}) nor regions.peer (${stage.regions.peer})`
              : 'only in a stage with `regions` (a one-Region stage reserves in its one Region)',
          );
      });
    });
    checkRules('operators', stage.operators);
    const accounts = callerAccounts(stage);
    if (stage.urlAccess.organizationId === undefined && accounts.length > MAX_URL_ACCOUNTS) {
      issue(
        ['urlAccess', 'organizationId'],
        `consumers and operators are in ${accounts.length} accounts; the Function URL's resource policy (20 KB) holds grants for ${MAX_URL_ACCOUNTS}: set urlAccess.organizationId to grant their organization instead`,
      );
    }
    const documentBytes = Buffer.byteLength(JSON.stringify(functionConfigDocuments(stage).vend));
    if (documentBytes > MAX_CONFIG_DOCUMENT_BYTES) {
      issue(
        ['consumers'],
        `the vend function's configuration document would take ${documentBytes} bytes; at most ${MAX_CONFIG_DOCUMENT_BYTES}`,
      );
    }
    const readers = new Set<string>();
    stage.breakGlassPrincipals.forEach((arn, index) => {
      if (readers.has(arn)) issue(['breakGlassPrincipals', index], `duplicate principal "${arn}"`);
      readers.add(arn);
      // The secrets use the aws/secretsmanager key and their policy grants nothing: another account's
      // principal could not read them anyway, so naming one is a mistake.
      if (arn.split(':')[4] !== stage.account) {
        issue(['breakGlassPrincipals', index], `not in the stage's account ${stage.account}`);
      }
      const refresherRoles = [refresherRoleName(stage.name)];
      if (stage.regions) refresherRoles.push(refresherRoleName(stage.name, stage.regions.peer));
      if (refresherRoles.some((role) => arn.endsWith(`:role/${role}`))) {
        issue(['breakGlassPrincipals', index], 'the refresher role reads the secrets already');
      }
    });
    // Production names at least one: a reviewed, named way to read a secret in an incident, rather than
    // rewriting the secret's policy under pressure (which check-config then reports as drift).
    if (stage.production && stage.breakGlassPrincipals.length === 0) {
      issue(['breakGlassPrincipals'], 'a production stage needs at least one break-glass principal');
    }
    // Production tokens get production protection. The other way round is allowed: a UAT stage may be
    // production-grade (deletion protection, retained data and logs) at no risk.
    if (stage.vendorEnvironment === 'prod' && !stage.production) {
      issue(['production'], 'must be true in a stage for the vendor\'s "prod" environment');
    }
    if (stage.alarms.emails.length + stage.alarms.httpsEndpoints.length === 0) {
      issue(['alarms'], 'needs at least one notification target (emails or httpsEndpoints)');
    }
    if (stage.production && stage.runbookUrl === undefined) {
      issue(['runbookUrl'], 'required for a production stage: the https:// address of docs/runbook.md');
    }
    if (stage.regions !== undefined) {
      for (const { key, message } of regionsIssues(stage.regions, stage.region))
        issue(['regions', key], message);
    }
    if (stage.production && stage.rollout.vendDeployment === 'ALL_AT_ONCE') {
      issue(
        ['rollout', 'vendDeployment'],
        'a production stage deploys gradually (a CANARY_ or LINEAR_ setting)',
      );
    }
  })
  .transform((stage) => ({ ...stage, runbookUrl: stage.runbookUrl ?? REPOSITORY_RUNBOOK_URL }));

export type StageInput = z.input<typeof stageConfigSchema>;
export type StageConfig = z.infer<typeof stageConfigSchema>;

/** Validates a stage; a wrong value throws a ConfigurationError naming the stage and the field. */
export function parseStageConfig(input: StageInput): StageConfig {
  const result = stageConfigSchema.safeParse(input, { error: unknownKeysError });
  if (!result.success) {
    const label = typeof input?.name === 'string' ? input.name : 'stage';
    throw new ConfigurationError(`invalid stage "${label}": ${describeIssues(result.error, label)}`);
  }
  return result.data;
}

/**
 * Each function's configuration document (shared/config/broker-config.ts): the sets as the functions read them
 * (the secret found by its name, every default filled in, since a deployed function uses the document without
 * parsing it again), and for the vend function the consumers and operators. The refresher needs the sets only.
 */
export function functionConfigDocuments(
  stage: Pick<StageConfig, 'name' | 'credentialSets' | 'consumers' | 'operators'>,
): {
  refresher: BrokerConfigDocument;
  vend: BrokerConfigDocument;
} {
  const credentialSets = stage.credentialSets.map(({ secretName, ...set }) => ({
    ...set,
    secretId: secretName,
  }));
  return {
    refresher: brokerConfigDocument({ stage: stage.name, credentialSets }),
    vend: brokerConfigDocument({
      stage: stage.name,
      credentialSets,
      consumers: stage.consumers,
      operators: stage.operators,
    }),
  };
}

/** The AWS accounts of every consumer and operator principal, each once, in configuration order. */
export function callerAccounts(stage: Pick<StageConfig, 'consumers' | 'operators'>): string[] {
  return [
    ...new Set(
      [...stage.consumers, ...stage.operators].map((entry) => entry.principalArn.split(':')[4] ?? ''),
    ),
  ];
}
