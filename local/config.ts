import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import * as z from 'zod';
import { DEFAULT_FAMILIES, sandboxFamiliesSchema } from '../sandbox/settings.js';
import { consumerSchema, requireReservedConsumers } from '../shared/config/consumers.js';
import {
  type CredentialSetConfig,
  credentialSetSchema,
  describeIssues,
  rateLimitSchema,
  VENDOR_DEFAULT_LIMITS,
} from '../shared/config/credential-sets.js';
import { operatorSchema } from '../shared/config/operators.js';
import { unknownKeysError } from '../shared/config/unknown-keys.js';
import { userBudgetIssues } from '../shared/config/user-budgets.js';
import { ConfigurationError } from '../shared/errors.js';
import { MIN_SLACK_FRACTION, planFor } from '../shared/ledger/limit-plan.js';

/**
 * The local broker's configuration file (default `local/broker.config.json`), with environment overrides:
 * BROKER_CONFIG (the file), BROKER_PORT, TIME_SCALE, BROKER_DATA_DIR, BROKER_DYNAMODB_ENDPOINT.
 */
const callerSchema = z.strictObject({
  name: z.string().min(1),
  accessKeyId: z.string().regex(/^[A-Z0-9]{16,128}$/, 'upper-case letters and digits, as AWS access key ids'),
  secretAccessKey: z.string().min(16),
  principalArn: consumerSchema.shape.principalArn,
});

const localSetSchema = credentialSetSchema.extend({
  /** Absent: the local sandbox of the set's environment. */
  vendorBaseUrl: credentialSetSchema.shape.vendorBaseUrl.optional(),
});

export const localConfigSchema = z.strictObject({
  port: z.number().int().min(0).max(65535).default(8787),
  /** The SigV4 signing region callers use for the local broker. */
  region: z.string().min(1).default('local'),
  /** Compresses every vendor lifetime and window, and every broker threshold and schedule, by this factor. */
  timeScale: z.number().min(1).max(10_000).default(1),
  /** How often the refresher runs (before time scaling), as the schedule does in AWS. */
  refreshIntervalSeconds: z.number().positive().default(300),
  /** A folder for dynalite's data; absent: in memory. */
  dataDir: z.string().min(1).optional(),
  /**
   * A DynamoDB endpoint to use instead of starting dynalite (DynamoDB Local, dynalite, LocalStack: spoken to
   * with local dummy credentials); the broker's tables are created there when missing.
   */
  dynamoDbEndpoint: z.url({ protocol: /^https?$/ }).optional(),
  /** JSON file {secretId: {username, password}} read by the file credentials source (relative to this file). */
  credentialsFile: z.string().min(1),
  sandbox: z
    .strictObject({
      tokenLifetimeSeconds: z
        .number()
        .positive()
        .default(4 * 3600),
      limits: z.array(rateLimitSchema).min(1).default(VENDOR_DEFAULT_LIMITS),
      windowKind: z.enum(['fixed', 'sliding']).default('fixed'),
      invalidatePreviousTokenOnLogin: z.boolean().default(false),
      /**
       * The vendor's endpoint families, each with limits of its own (docs/sandbox.md), checked as the sandbox
       * checks them: an unknown key, a bad name, prefix or limit, a repeated name or overlapping prefixes are
       * refused. Default: the sandbox's (reports, rebalancing); `[]`: none.
       */
      families: sandboxFamiliesSchema.default(DEFAULT_FAMILIES),
    })
    .default({
      tokenLifetimeSeconds: 4 * 3600,
      limits: VENDOR_DEFAULT_LIMITS,
      windowKind: 'fixed',
      invalidatePreviousTokenOnLogin: false,
      families: DEFAULT_FAMILIES,
    }),
  credentialSets: z.array(localSetSchema).min(1),
  callers: z.array(callerSchema).min(1),
  consumers: z.array(consumerSchema),
  /** Callers that may read the status (GET /v1/credential-sets) and nothing else, as a stage's `operators`. */
  operators: z.array(operatorSchema).default([]),
});
export type LocalConfig = z.infer<typeof localConfigSchema>;

export interface LoadedLocalConfig extends LocalConfig {
  /** Absolute path of the file it came from. */
  configPath: string;
  /** Absolute path of the credentials file. */
  credentialsPath: string;
}

export const DEFAULT_CONFIG_PATH = 'local/broker.config.json';

function numberFromEnv(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) throw new ConfigurationError(`${name}: not a number ("${value}")`);
  return parsed;
}

/** Reads and validates the local configuration; every wrong value is named. */
export function loadLocalConfig(
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): LoadedLocalConfig {
  const configPath = resolve(cwd, env.BROKER_CONFIG || DEFAULT_CONFIG_PATH);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(configPath, 'utf8'));
  } catch (cause) {
    throw new ConfigurationError(`BROKER_CONFIG: cannot read ${configPath} as JSON`, { cause });
  }
  const overrides: Record<string, unknown> = {};
  const port = numberFromEnv('BROKER_PORT', env.BROKER_PORT);
  if (port !== undefined) overrides.port = port;
  const timeScale = numberFromEnv('TIME_SCALE', env.TIME_SCALE);
  if (timeScale !== undefined) overrides.timeScale = timeScale;
  if (env.BROKER_DATA_DIR) overrides.dataDir = env.BROKER_DATA_DIR;
  if (env.BROKER_DYNAMODB_ENDPOINT) overrides.dynamoDbEndpoint = env.BROKER_DYNAMODB_ENDPOINT;
  const result = localConfigSchema.safeParse(
    { ...(raw as object), ...overrides },
    { error: unknownKeysError },
  );
  if (!result.success)
    throw new ConfigurationError(`invalid configuration: ${describeIssues(result.error, configPath)}`);
  const config = result.data;
  if (config.dataDir && config.dynamoDbEndpoint)
    throw new ConfigurationError(
      'invalid configuration: dataDir (BROKER_DATA_DIR) is for the local dynalite; with dynamoDbEndpoint (BROKER_DYNAMODB_ENDPOINT) the data lives at that endpoint',
    );
  // Sets of one secret are one vendor user: with quotaScope "user", one budget (ledgerKeyFor).
  const [budget] = userBudgetIssues(config.credentialSets);
  if (budget)
    throw new ConfigurationError(
      `invalid configuration: ${configPath}.credentialSets[${budget.index}].${budget.field}: ${budget.message}`,
    );
  const setIds = new Set(config.credentialSets.map((set) => set.id));
  config.consumers.forEach((consumer, index) => {
    for (const setId of consumer.credentialSets) {
      if (!setIds.has(setId)) {
        throw new ConfigurationError(
          `invalid configuration: ${configPath}.consumers[${index}]: unknown set "${setId}"`,
        );
      }
    }
  });
  requireReservedConsumers(config.credentialSets, config.consumers, `${configPath}.credentialSets`);
  // The local broker is one Region: a reservation's `region` is for a deployed stage with `regions`.
  config.credentialSets.forEach((set, index) => {
    const r = set.rateLimits.reservations?.findIndex((reservation) => reservation.region !== undefined) ?? -1;
    if (r >= 0)
      throw new ConfigurationError(
        `invalid configuration: ${configPath}.credentialSets[${index}].rateLimits.reservations[${r}].region: only in a deployed stage with \`regions\` (the local broker is one Region)`,
      );
  });
  config.operators.forEach((operator, index) => {
    for (const setId of operator.credentialSets ?? []) {
      if (!setIds.has(setId)) {
        throw new ConfigurationError(
          `invalid configuration: ${configPath}.operators[${index}]: unknown set "${setId}"`,
        );
      }
    }
  });
  const base = dirname(configPath);
  return {
    ...config,
    configPath,
    credentialsPath: resolve(base, config.credentialsFile),
    ...(config.dataDir ? { dataDir: resolve(cwd, config.dataDir) } : {}),
  };
}

/** Latency does not compress: a permit's send margin stays at least this long whatever the time scale. */
const MIN_MARGIN_SECONDS = 1;
const MIN_PERMIT_VALIDITY_SECONDS = 0.5;

/**
 * A credential set with every broker threshold and window divided by the time scale. Reservations are scaled
 * with their windows, and dropped when the compressed rings (a margin of at least a second over windows of
 * milliseconds) would make the ledger item too large for them.
 */
export function scaleCredentialSet(set: CredentialSetConfig, scale: number): CredentialSetConfig {
  if (scale === 1) return set;
  const scaled = scaleAll(set, scale);
  if (!scaled.rateLimits.reservations) return scaled;
  try {
    planFor(scaled.rateLimits);
    return scaled;
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    return {
      ...scaled,
      rateLimits: withoutReservations(scaled.rateLimits),
    };
  }
}

/** Rate-limit settings as they are, less their reservations. */
export function withoutReservations<T extends { reservations?: unknown }>(
  limits: T,
): Omit<T, 'reservations'> {
  const { reservations: _, ...rest } = limits;
  return rest;
}

function scaleAll(set: CredentialSetConfig, scale: number): CredentialSetConfig {
  const scaleLimit = (limit: { limit: number; windowSeconds: number }) => ({
    limit: limit.limit,
    windowSeconds: limit.windowSeconds / scale,
  });
  const marginSeconds = Math.max(set.rateLimits.marginSeconds / scale, MIN_MARGIN_SECONDS);
  return {
    ...set,
    refresh: {
      ...set.refresh,
      softThresholdSeconds: set.refresh.softThresholdSeconds / scale,
      softThresholdJitterSeconds: set.refresh.softThresholdJitterSeconds / scale,
      hardFloorSeconds: set.refresh.hardFloorSeconds / scale,
      credentialsCooldownSeconds: set.refresh.credentialsCooldownSeconds / scale,
      credentialsCooldownMaxSeconds: set.refresh.credentialsCooldownMaxSeconds / scale,
      minAttemptIntervalSeconds: set.refresh.minAttemptIntervalSeconds / scale,
      retryBackoffBaseSeconds: set.refresh.retryBackoffBaseSeconds / scale,
      retryBackoffMaxSeconds: set.refresh.retryBackoffMaxSeconds / scale,
      // The lease covers a real login (retries, timeouts) and the token-lifetime sanity bound is an upper
      // bound: neither compresses. Nor does the clock skew bound (clocks differ in real seconds), nor the
      // lifetime fractions (the sandbox's lifetime is compressed already).
    },
    rateLimits: {
      ...set.rateLimits,
      general: set.rateLimits.general.map(scaleLimit),
      classes: Object.fromEntries(
        Object.entries(set.rateLimits.classes).map(([name, limits]) => [name, limits.map(scaleLimit)]),
      ),
      // A reservation names its window by windowSeconds: the scaled window's (the same division, the same text).
      ...(set.rateLimits.reservations
        ? {
            reservations: set.rateLimits.reservations.map((reservation) => ({
              ...reservation,
              perWindow: Object.fromEntries(
                Object.entries(reservation.perWindow).map(([seconds, amount]) => [
                  String(Number(seconds) / scale),
                  amount,
                ]),
              ),
            })),
          }
        : {}),
      marginSeconds,
      permitValiditySeconds: Math.min(
        marginSeconds * (1 - MIN_SLACK_FRACTION),
        Math.max(set.rateLimits.permitValiditySeconds / scale, MIN_PERMIT_VALIDITY_SECONDS),
      ),
    },
  };
}
