import * as z from 'zod';
import { ConfigurationError } from '../errors.js';
import { lazySchema } from '../lazy-schema.js';
import { planFor } from '../ledger/limit-plan.js';
import { VENDOR_ENVIRONMENTS } from '../vendor-client/types.js';
import { isLoopbackHostname } from '../vendor-client/vendor-url.js';
import { rateLimitSettingsShape } from './rate-limits.js';
import { plainIssues, unknownKeysError } from './unknown-keys.js';
import { userBudgetIssues } from './user-budgets.js';

// The shape of `rateLimits` is rate-limits.ts's (the ledger reads its type from there); this module adds the
// ledger's own checks to it. Its names are kept here for the modules that import them from here.
export {
  type RateLimit,
  type RateLimitSettings,
  rateLimitSchema,
  VENDOR_DEFAULT_LIMITS,
} from './rate-limits.js';

/** HTTPS only; plain HTTP only for loopback (the sandbox), by the vendor client's own loopback rule. */
export const vendorBaseUrlSchema = lazySchema(() =>
  z
    .string()
    .url()
    .refine(
      (value) => {
        if (!URL.canParse(value)) return false;
        const url = new URL(value);
        return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHostname(url.hostname));
      },
      { message: 'must be https:// (plain http:// is accepted only for loopback addresses)' },
    ),
);

export const refreshSettingsSchema = lazySchema(() =>
  z
    .strictObject({
      /**
       * Re-login when the token has less than this left (before jitter). An hour leaves room for a dozen
       * 5-minute scheduled runs, their retries, and a vendor outage of 40 minutes before the hard floor.
       */
      softThresholdSeconds: z.number().positive().default(3600),
      /** Up to this much more, chosen per set from its id, so sets that logged in together part ways. */
      softThresholdJitterSeconds: z.number().nonnegative().default(900),
      /** No token is handed out or kept as usable past `exp` minus this (the vendor's 5-minute rule). */
      hardFloorSeconds: z.number().positive().default(300),
      /**
       * Each soft and hard threshold is also at most this fraction of the token's own lifetime (from its `iat`,
       * else from the login), so a short-lived token is used for most of its life and re-logged in once: with
       * the defaults a 4-hour token is replaced with 19-20 % of its life left (the configured hour for 8 hours).
       */
      softThresholdLifetimeFraction: z.number().gt(0).lt(1).default(0.2),
      /** Up to this fraction of the lifetime less, chosen per set from its id (the lifetime-bound jitter). */
      softThresholdLifetimeJitterFraction: z.number().min(0).lt(1).default(0.01),
      /**
       * The hard floor is at most this fraction of the lifetime: the vendor's 5 minutes are 1-2 % of a 4-8 hour
       * token, but half of a 10-minute one (30 s of it with the default).
       */
      hardFloorLifetimeFraction: z.number().gt(0).lt(1).default(0.05),
      /**
       * The largest vendor clock offset (from its `Date` header) the broker accepts. Every validity decision is
       * made on the vendor's clock as measured at login; a login measuring more than this is refused (the
       * clock, or the header, is wrong) and the current token, if any, stays in use.
       */
      maxClockSkewSeconds: z.number().nonnegative().default(900),
      /**
       * After INVALID_CREDENTIALS, no new attempt with the same secret version for this long; each further
       * rejection of that version multiplies it by `credentialsCooldownGrowth`, up to the max (15 min, 1 h, 4 h,
       * 16 h, then daily). A new secret version is tried at once and starts again from the first step.
       */
      credentialsCooldownSeconds: z.number().positive().default(900),
      credentialsCooldownGrowth: z.number().min(1).default(4),
      credentialsCooldownMaxSeconds: z.number().positive().default(86_400),
      /** A token whose `exp` is further away than this is refused as absurd. */
      maxTokenLifetimeSeconds: z
        .number()
        .positive()
        .default(24 * 3600),
      /** Across all processes, at most one login attempt per set in this span (the storm guard). */
      minAttemptIntervalSeconds: z.number().positive().default(60),
      /**
       * After a vendor failure (5xx, 429, timeout), wait base·2^(n-1) seconds, at most the cap. The cap stays
       * below the 5-minute schedule period, so the first scheduled run after an outage logs in.
       */
      retryBackoffBaseSeconds: z.number().positive().default(60),
      retryBackoffMaxSeconds: z.number().positive().default(240),
      /** How long a refresh lease holds when its holder dies: about twice the vendor client's retry budget. */
      leaseSeconds: z.number().positive().default(60),
    })
    .refine((s) => s.softThresholdSeconds > s.hardFloorSeconds, {
      message: 'softThresholdSeconds must be greater than hardFloorSeconds',
      path: ['softThresholdSeconds'],
    })
    .refine(
      (s) =>
        s.softThresholdLifetimeFraction - s.softThresholdLifetimeJitterFraction > s.hardFloorLifetimeFraction,
      {
        message:
          'softThresholdLifetimeFraction less its jitter must be greater than hardFloorLifetimeFraction',
        path: ['softThresholdLifetimeFraction'],
      },
    )
    .refine((s) => s.credentialsCooldownMaxSeconds >= s.credentialsCooldownSeconds, {
      message: 'credentialsCooldownMaxSeconds must be at least credentialsCooldownSeconds',
      path: ['credentialsCooldownMaxSeconds'],
    })
    .refine((s) => s.retryBackoffMaxSeconds >= s.retryBackoffBaseSeconds, {
      message: 'retryBackoffMaxSeconds must be at least retryBackoffBaseSeconds',
      path: ['retryBackoffMaxSeconds'],
    }),
);
export type RefreshSettings = z.infer<typeof refreshSettingsSchema>;

export const rateLimitSettingsSchema = lazySchema(() =>
  rateLimitSettingsShape
    // The ledger's own checks (slack below the margin, classes, item size), with its message, at parse time.
    .superRefine((settings, ctx) => {
      try {
        planFor(settings);
      } catch (error) {
        const message = (error as Error).message;
        // A reservation's own mistake is reported on the field, e.g. `rateLimits.reservations`.
        ctx.addIssue({
          code: 'custom',
          message,
          ...(message.includes('reservations') ? { path: ['reservations'] } : {}),
        });
      }
    }),
);

/** What a credential set id may be, e.g. `prod-advisor`: the schema's rule, and the vend API's for echoing one. */
export const CREDENTIAL_SET_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

// The defaults are parsed once, without zod's eval-compiled object fast path (see parseConfig).
export const credentialSetSchema = lazySchema(() =>
  z.strictObject({
    /** For example `prod-advisor`. */
    id: z.string().regex(CREDENTIAL_SET_ID, 'lowercase letters, digits and dashes, at most 63'),
    environment: z.enum(VENDOR_ENVIRONMENTS),
    /** The company role the credentials belong to, for example `advisor` or `execution-platform`. */
    companyRole: z.string().regex(/^[a-z][a-z0-9-]*$/),
    vendorBaseUrl: vendorBaseUrlSchema,
    /** Secrets Manager secret id (name or ARN) holding {"username": ..., "password": ...}. */
    secretId: z.string().min(1),
    refresh: refreshSettingsSchema.default(refreshSettingsSchema.parse({}, { jitless: true })),
    /**
     * What the vendor counts its quota per: `token` (each access token has its own budget, as §8 says) or
     * `user` (all tokens of the login share one). With `user`, the current and the previous token draw on one
     * ledger budget, which keeps the bound whichever way the vendor counts (docs/runbook.md says how to tell).
     */
    quotaScope: z.enum(['token', 'user']).default('token'),
    /**
     * The values of the token's `env` claim that name this set's environment, compared case-insensitively
     * (default: the environment's own name, `uat` or `prod`). A token whose claim is none of them is discarded.
     */
    expectedEnvClaims: z.array(z.string().trim().min(1).max(64)).min(1).max(8).optional(),
    rateLimits: rateLimitSettingsSchema.default(rateLimitSettingsSchema.parse({}, { jitless: true })),
  }),
);
export type CredentialSetConfig = z.infer<typeof credentialSetSchema>;
export type CredentialSetInput = z.input<typeof credentialSetSchema>;

export const credentialSetsSchema = lazySchema(() =>
  z
    .array(credentialSetSchema)
    .min(1)
    .superRefine((sets, ctx) => {
      const seen = new Set<string>();
      sets.forEach((set, index) => {
        if (seen.has(set.id)) {
          ctx.addIssue({
            code: 'custom',
            path: [index, 'id'],
            message: `duplicate credential set id "${set.id}"`,
          });
        }
        seen.add(set.id);
      });
      // Sets of one secret are one vendor user: with quotaScope "user", one budget (ledgerKeyFor).
      for (const { index, field, message } of userBudgetIssues(sets)) {
        ctx.addIssue({ code: 'custom', path: [index, field], message });
      }
    }),
);

/** The `env` claim values a set accepts, lower-cased: the configured ones, else the environment's name. */
export const expectedEnvClaimsOf = (set: Pick<CredentialSetConfig, 'environment' | 'expectedEnvClaims'>) =>
  (set.expectedEnvClaims ?? [set.environment]).map((value) => value.toLowerCase());

/** Turns zod issues into one message that names every wrong field, e.g. `credentialSets[1].environment`. */
export function describeIssues(error: z.ZodError, root: string): string {
  return plainIssues(error.issues)
    .map((issue) => {
      const path = issue.path.reduce<string>(
        (acc, part) => (typeof part === 'number' ? `${acc}[${part}]` : `${acc}.${String(part)}`),
        root,
      );
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}

/** Parses a configuration value (JSON text or a value) with its schema; a wrong value names itself. */
export function parseConfig<T extends z.ZodType>(schema: T, input: unknown, source: string): z.infer<T> {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input);
    } catch (cause) {
      throw new ConfigurationError(`${source}: not valid JSON`, { cause });
    }
  }
  // Parsed once per cold start: zod's eval-compiled fast path for objects would cost more to build than it saves.
  const result = schema.safeParse(value, { jitless: true, error: unknownKeysError });
  if (!result.success) {
    throw new ConfigurationError(`invalid configuration: ${describeIssues(result.error, source)}`);
  }
  return result.data;
}

/** Parses credential sets (from JSON text or a value) once, at cold start; a wrong value names itself. */
export function parseCredentialSets(input: unknown, source = 'credentialSets'): CredentialSetConfig[] {
  return parseConfig(credentialSetsSchema, input, source);
}
