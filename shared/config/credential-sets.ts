import * as z from 'zod';
import { ConfigurationError } from '../errors.js';
import { lazySchema } from '../lazy-schema.js';
import { planFor } from '../ledger/limit-plan.js';
import { VENDOR_ENVIRONMENTS } from '../vendor-client/types.js';
import { isLoopbackHostname } from '../vendor-client/vendor-url.js';
import { MAX_PATTERNS_PER_CLASS, patternProblem } from './request-classes.js';
import { plainIssues, unknownKeysError } from './unknown-keys.js';
import { userBudgetIssues } from './user-budgets.js';

/** One limit of the vendor's quota: at most `limit` requests in any span of `windowSeconds`. */
export const rateLimitSchema = lazySchema(() =>
  z.strictObject({
    limit: z.number().int().positive(),
    windowSeconds: z.number().positive(),
  }),
);
export type RateLimit = z.infer<typeof rateLimitSchema>;

/** The vendor's documented quota per access token (vendor-api.md §8). */
export const VENDOR_DEFAULT_LIMITS: RateLimit[] = [
  { limit: 50, windowSeconds: 60 },
  { limit: 1000, windowSeconds: 3600 },
];

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

/** A class's path patterns, each checked by the rules of request-classes.ts, with the rule it breaks. */
const classPathsSchema = lazySchema(() =>
  z
    .array(
      z.string().superRefine((pattern, ctx) => {
        const problem = patternProblem(pattern);
        if (problem) ctx.addIssue({ code: 'custom', message: `path pattern ${problem}` });
      }),
    )
    .min(1, 'give at least one path pattern, or leave paths out')
    .max(MAX_PATTERNS_PER_CLASS, `at most ${MAX_PATTERNS_PER_CLASS} path patterns per class`),
);

const classLimitsSchema = lazySchema(() => z.array(rateLimitSchema));
const classObjectSchema = lazySchema(() =>
  z.strictObject({ paths: classPathsSchema.optional(), limits: classLimitsSchema.optional() }),
);

/** A class as configured: its limits (a list; `[]` = learned), or an object with paths and limits. */
type ClassSettingInput = RateLimit[] | { paths?: string[] | undefined; limits?: RateLimit[] | undefined };
type ClassSetting = { paths?: string[]; limits: RateLimit[] };

/**
 * The form is chosen by the value's type (a list, else the object), so that a mistake is reported in the terms
 * of the form that was meant, with its field, rather than as "matches neither form". The object is strict: an
 * unknown key (a typo such as `path`) is refused.
 */
const classSettingsSchema = lazySchema(
  () =>
    z.unknown().transform((value, ctx): ClassSetting => {
      // A parse of its own does not inherit the outer parse's error map: an unknown key names its closest key.
      const result = Array.isArray(value)
        ? classLimitsSchema.safeParse(value, { error: unknownKeysError })
        : classObjectSchema.safeParse(value, { error: unknownKeysError });
      if (!result.success) {
        // The form's own issues, their paths relative to this value (zod's issue type is wider than addIssue's).
        for (const issue of result.error.issues) ctx.addIssue(issue as never);
        return z.NEVER;
      }
      if (Array.isArray(result.data)) return { limits: result.data };
      return {
        limits: result.data.limits ?? [],
        ...(result.data.paths ? { paths: result.data.paths } : {}),
      };
    }) as unknown as z.ZodType<ClassSetting, ClassSettingInput>,
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
  z
    .strictObject({
      general: z.array(rateLimitSchema).min(1).default(VENDOR_DEFAULT_LIMITS),
      /**
       * Named classes of resource-intensive endpoints (reports, rebalancing), each its limits (a list, as before)
       * or `{ "paths": ["/reports/**"], "limits": [...] }` (both optional): the paths classify vendor requests
       * (shared/config/request-classes.ts), and limits absent or `[]` are learned from the vendor's answers (docs/class-limits.md).
       * Parsed into `classes` (each class's limits, `[]` = learned) and `classPaths` (classes with paths). Bounded
       * so that the token's ledger item stays within one DynamoDB write unit (see planFor): at the default general
       * limits, item format 1 fits one class of about 10 a minute, item format 2 four classes of 25 a minute and
       * 500 an hour.
       */
      classes: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/), classSettingsSchema).default({}),
      /**
       * The classes' paths as the parsed form writes them (the functions' configuration document is that form, and
       * is read again as written). In a stage or local file, give a class's paths in `classes` instead.
       */
      classPaths: z.record(z.string(), classPathsSchema).optional(),
      /** Between a grant and the vendor seeing the request: permit validity, send delay, clock differences. */
      marginSeconds: z.number().nonnegative().default(3),
      /** How long a granted permit may be used for sending. Must leave a fifth of the margin as slack. */
      permitValiditySeconds: z.number().positive().default(2),
      /**
       * How the set's ledger item is written: 1, text rings that the previous release reads too; 2, packed, which
       * fits four classes in one write unit and which releases before this one cannot read (they fail closed on
       * it). Unset: 1 where the item fits one write unit in it (no classes), else 2 (docs/deploying.md, "Rolling
       * forward and back").
       */
      itemFormat: z.union([z.literal(1), z.literal(2)]).optional(),
      /**
       * Shares of the general limits held for named consumers (their `name` in `consumers`), per general window
       * (its `windowSeconds`, as a JSON key): `[{ "consumer": "order-service", "perWindow": { "60": 20 } }]`. A
       * reserved consumer always obtains up to its reservation in every window it holds one for; everyone shares
       * the rest (it too, beyond its reservation). Unused reservations are not lent (docs/design.md, "Reservations":
       * why, and what it costs). At most 10 consumers; per window they leave at least 10 % of the limit shared.
       */
      reservations: z
        .array(
          z.strictObject({
            consumer: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'the name of a consumer of this set'),
            perWindow: z.record(
              z.string().regex(/^[0-9]+(\.[0-9]+)?$/, 'the windowSeconds of a general limit'),
              z.number().int().positive(),
            ),
          }),
        )
        .optional(),
    })
    .superRefine((settings, ctx) => {
      for (const name of Object.keys(settings.classPaths ?? {})) {
        const setting = settings.classes[name];
        if (!setting || setting.paths)
          ctx.addIssue({
            code: 'custom',
            path: ['classPaths', name],
            message: setting
              ? `the paths of class "${name}" are given in classes.${name}.paths already`
              : `"${name}" is not one of classes`,
          });
      }
      // A path is of one class: the same pattern in two classes would make the later one's dead.
      const owner = new Map<string, string>();
      for (const [name, setting] of Object.entries(settings.classes)) {
        const given = setting.paths ? ['classes', name, 'paths'] : ['classPaths', name];
        (setting.paths ?? settings.classPaths?.[name])?.forEach((pattern, index) => {
          const first = owner.get(pattern);
          if (first !== undefined) {
            ctx.addIssue({
              code: 'custom',
              path: [...given, index],
              message:
                first === name
                  ? `path pattern "${pattern}" is given twice`
                  : `path pattern "${pattern}" is also a pattern of class "${first}" (a path is of one class)`,
            });
          }
          owner.set(pattern, name);
        });
      }
    })
    // Parsing the parsed form gives it back (the functions' document is read again as written: verifyBrokerConfig).
    .transform(({ classes, classPaths, ...settings }) => ({
      ...settings,
      classes: Object.fromEntries(Object.entries(classes).map(([name, setting]) => [name, setting.limits])),
      classPaths: Object.fromEntries(
        Object.entries(classes).flatMap(([name, setting]) => {
          const paths = setting.paths ?? classPaths?.[name];
          return paths ? [[name, paths]] : [];
        }),
      ),
    }))
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
export type RateLimitSettings = z.infer<typeof rateLimitSettingsSchema>;

// The defaults are parsed once, without zod's eval-compiled object fast path (see parseConfig).
export const credentialSetSchema = lazySchema(() =>
  z.strictObject({
    /** For example `prod-advisor`. */
    id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'lowercase letters, digits and dashes, at most 63'),
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
