import * as z from 'zod';
import { lazySchema } from '../lazy-schema.js';

// The shape of a credential set's `rateLimits`, without the ledger's checks (credential-sets.ts adds them as
// rateLimitSettingsSchema): the ledger (limit-plan.ts) compiles these settings, so it takes their type from here,
// while the checked schema imports the ledger.

/** One limit of the vendor's quota: at most `limit` requests in any span of `windowSeconds`. */
export const rateLimitSchema = lazySchema(() =>
  z.object({
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

export const rateLimitSettingsShape = lazySchema(() =>
  z.object({
    general: z.array(rateLimitSchema).min(1).default(VENDOR_DEFAULT_LIMITS),
    /**
     * Lower limits for named classes of resource-intensive endpoints (reports, rebalancing). Bounded so that the
     * token's ledger item stays within one DynamoDB write unit (see planFor): at the default general limits, item
     * format 1 fits one class of about 10 a minute, item format 2 four classes of 25 a minute and 500 an hour.
     */
    classes: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/), z.array(rateLimitSchema).min(1)).default({}),
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
     * the rest (it too, beyond its reservation). Unused reservations are not lent (README, "Reservations":
     * why, and what it costs). At most 10 consumers; per window they leave at least 10 % of the limit shared.
     */
    reservations: z
      .array(
        z.object({
          consumer: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'the name of a consumer of this set'),
          perWindow: z.record(
            z.string().regex(/^[0-9]+(\.[0-9]+)?$/, 'the windowSeconds of a general limit'),
            z.number().int().positive(),
          ),
        }),
      )
      .optional(),
  }),
);
export type RateLimitSettings = z.infer<typeof rateLimitSettingsShape>;
