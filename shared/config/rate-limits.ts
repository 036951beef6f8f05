import * as z from 'zod';
import { lazySchema } from '../lazy-schema.js';
import { MAX_PATTERNS_PER_CLASS, patternProblem } from './request-classes.js';
import { unknownKeysError } from './unknown-keys.js';

// The shape of a credential set's `rateLimits`, without the ledger's checks (credential-sets.ts adds them as
// rateLimitSettingsSchema): the ledger (limit-plan.ts) compiles these settings, so it takes their type from here,
// while the checked schema imports the ledger.

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

export const rateLimitSettingsShape = lazySchema(() =>
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
            /**
             * A stage with `regions` only (docs/multi-region.md): the Region whose leased share carries this
             * reservation (its home or its peer); in the other Region the consumer is served from the shared part.
             * Without it, a two-Region stage serves the consumer from the shared part in both.
             */
            region: z
              .string()
              .regex(/^[a-z]{2}(-[a-z]+)+-[0-9]$/, 'an AWS Region, e.g. eu-west-1')
              .optional(),
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
    })),
);
export type RateLimitSettings = z.infer<typeof rateLimitSettingsShape>;
