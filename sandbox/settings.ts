import * as z from 'zod';
import { type Clock, systemClock } from '../shared/clock.js';
import { ConfigurationError } from '../shared/errors.js';
import { VENDOR_ENVIRONMENTS, type VendorEnvironment } from '../shared/vendor-client/types.js';
import { defaultSandboxUsers, type SandboxUser, sandboxUsersSchema } from './users.js';

export interface SandboxLimit {
  limit: number;
  windowSeconds: number;
}

/** `fixed` = windows aligned to the epoch of the vendor clock (floor(now/W)*W); `sliding` = exact log. */
export type WindowKind = 'fixed' | 'sliding';

export type RateLimitScope = 'token' | 'user';

/**
 * An endpoint family with its own lower limits (vendor-api.md §8: "reports, rebalancing: lower limits ... not
 * shown"): every request whose path starts with `pathPrefix` counts against these limits AND the general ones.
 */
export interface SandboxFamily {
  /** Lowercase letters, digits and dashes, e.g. `reports`. */
  name: string;
  /** An absolute path ending in `/`, e.g. `/reports/`; no family's prefix may start another's. */
  pathPrefix: string;
  /** Counted per token or per user (`rateLimitScope`) and fixed or sliding (`windowKind`), as the general ones. */
  limits: SandboxLimit[];
}

export interface SandboxSettings {
  environment: VendorEnvironment;
  /** 0 (default) = a free port; the sandbox always binds 127.0.0.1 only. */
  port?: number;
  /** Default systemClock. All sandbox time (exp, iat, windows, Date header) comes from it. */
  clock?: Clock;
  /** Default: defaultSandboxUsers(environment). */
  users?: SandboxUser[];
  /** Default 14400 (4 h). */
  tokenLifetimeSeconds?: number;
  /** Default: the vendor's documented 50/60 s and 1000/3600 s. */
  limits?: SandboxLimit[];
  windowKind?: WindowKind;
  /**
   * Endpoint families with lower limits of their own; default: `reports` at `/reports/` (10/60 s + 60/3600 s) and
   * `rebalancing` at `/rebalancing/` (4/60 s + 20/3600 s), values the vendor does not publish. `[]`: none.
   */
  families?: SandboxFamily[];
  /**
   * Keep a log of every rate-limited outcome (served or refused, with its family and the limit that refused it),
   * read with `Sandbox.requestLog()`: the vendor's own record, for span checks. Default false (it grows).
   */
  recordRequests?: boolean;
  /** When true a new login makes the user's older tokens 401 TOKEN_INVALID. */
  invalidatePreviousTokenOnLogin?: boolean;
  /**
   * What the quota is counted per: `token` (default, as §8 says: each access token has its own budget) or
   * `user` (all tokens of one login user share one budget; the vendor document cannot rule it out).
   */
  rateLimitScope?: RateLimitScope;
  /** The `env` claim written into new tokens (default: the environment's name), e.g. `PROD`, `production`. */
  envClaim?: string;
  /** 0..1: fraction of requests answered with a random status of `failureStatuses`. */
  failureRate?: number;
  failureStatuses?: number[];
  /** Added to every answer that gets past outage, faults and failureRate (real time, setTimeout). */
  latencyMs?: number;
  /** 503 on everything except /_sandbox/*. */
  outage?: boolean;
  /** 503 on logins only: tokens already issued keep working (the login service is down, the API is not). */
  loginOutage?: boolean;
  /** The vendor's clock = clock.now() + offset. */
  clockOffsetSeconds?: number;
  /** Default Math.random; tests pass a seeded one. */
  random?: () => number;
  /** No request log lines. */
  quiet?: boolean;
}

export type MutableSandboxSettings = Omit<
  SandboxSettings,
  'environment' | 'port' | 'clock' | 'users' | 'random'
>;

export const sandboxLimitSchema = z.strictObject({
  limit: z.number().int().positive(),
  windowSeconds: z
    .number()
    .positive()
    .max(86_400 * 31),
});

/** Unreserved characters only, so a prefix is matched against the path exactly as it was sent. */
const PATH_PREFIX = /^(\/[A-Za-z0-9._~-]+)+\/$/;

export const sandboxFamilySchema = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'lowercase letters, digits and dashes, at most 63'),
  pathPrefix: z
    .string()
    .max(256)
    .regex(PATH_PREFIX, 'an absolute path of letters, digits and . _ ~ -, ending in /')
    .refine((prefix) => !prefix.startsWith('/_sandbox/'), 'must not be under /_sandbox/ (the operator API)'),
  limits: z.array(sandboxLimitSchema).max(16),
});

export const sandboxFamiliesSchema = z
  .array(sandboxFamilySchema)
  .max(16)
  .superRefine((families, ctx) => {
    families.forEach((family, index) => {
      families.slice(0, index).forEach((earlier) => {
        if (earlier.name === family.name) {
          ctx.addIssue({
            code: 'custom',
            path: [index, 'name'],
            message: `repeats the name "${family.name}"`,
          });
        }
        // One request, one family: overlapping prefixes would make it depend on the order.
        if (
          earlier.pathPrefix.startsWith(family.pathPrefix) ||
          family.pathPrefix.startsWith(earlier.pathPrefix)
        ) {
          ctx.addIssue({
            code: 'custom',
            path: [index, 'pathPrefix'],
            message: `overlaps the prefix of family "${earlier.name}"`,
          });
        }
      });
    });
  });

/** Every setting that may change while the sandbox runs (API `update`, `POST /_sandbox/settings`). */
export const mutableSettingsSchema = z.strictObject({
  tokenLifetimeSeconds: z.number().int().positive().optional(),
  limits: z.array(sandboxLimitSchema).max(16).optional(),
  windowKind: z.enum(['fixed', 'sliding']).optional(),
  families: sandboxFamiliesSchema.optional(),
  recordRequests: z.boolean().optional(),
  invalidatePreviousTokenOnLogin: z.boolean().optional(),
  rateLimitScope: z.enum(['token', 'user']).optional(),
  envClaim: z.string().min(1).max(64).optional(),
  failureRate: z.number().min(0).max(1).optional(),
  failureStatuses: z.array(z.number().int().min(400).max(599)).min(1).optional(),
  latencyMs: z.number().min(0).max(120_000).optional(),
  outage: z.boolean().optional(),
  loginOutage: z.boolean().optional(),
  clockOffsetSeconds: z.number().finite().optional(),
  quiet: z.boolean().optional(),
});

/** The settings the sandbox runs with, every default filled in. */
export interface ResolvedSettings extends Required<Omit<MutableSandboxSettings, 'envClaim'>> {
  /** Absent: the environment's name. */
  envClaim?: string;
  environment: VendorEnvironment;
  port: number;
  clock: Clock;
  users: SandboxUser[];
  random: () => number;
}

/**
 * The sandbox's stand-ins for the vendor's unpublished lower limits: below the general 50/60 s and 1000/3600 s,
 * each window of a different size from the general ones, so an answer's X-RateLimit-Limit tells whose it is.
 */
export const DEFAULT_FAMILIES: SandboxFamily[] = [
  {
    name: 'reports',
    pathPrefix: '/reports/',
    limits: [
      { limit: 10, windowSeconds: 60 },
      { limit: 60, windowSeconds: 3600 },
    ],
  },
  {
    name: 'rebalancing',
    pathPrefix: '/rebalancing/',
    limits: [
      { limit: 4, windowSeconds: 60 },
      { limit: 20, windowSeconds: 3600 },
    ],
  },
];

const DEFAULTS: Required<Omit<MutableSandboxSettings, 'envClaim'>> = {
  tokenLifetimeSeconds: 14_400,
  limits: [
    { limit: 50, windowSeconds: 60 },
    { limit: 1000, windowSeconds: 3600 },
  ],
  windowKind: 'fixed',
  families: DEFAULT_FAMILIES,
  recordRequests: false,
  invalidatePreviousTokenOnLogin: false,
  rateLimitScope: 'token',
  failureRate: 0,
  failureStatuses: [500, 502, 503, 504],
  latencyMs: 0,
  outage: false,
  loginOutage: false,
  clockOffsetSeconds: 0,
  quiet: false,
};

/** "limits.0.limit: Too small: expected number to be >0"; never echoes the value (it may be a password). */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`)
    .join('; ');
}

/** Validates a partial update; throws ConfigurationError naming every bad field. */
export function parseMutableSettings(
  input: unknown,
  what = 'sandbox settings',
): Partial<MutableSandboxSettings> {
  const parsed = mutableSettingsSchema.safeParse(input);
  if (!parsed.success) throw new ConfigurationError(`${what}: ${describeIssues(parsed.error)}`);
  // Drop keys given as undefined so they do not overwrite a value with nothing.
  return Object.fromEntries(Object.entries(parsed.data).filter(([, v]) => v !== undefined));
}

export function resolveSettings(settings: SandboxSettings): ResolvedSettings {
  if (!VENDOR_ENVIRONMENTS.includes(settings.environment)) {
    throw new ConfigurationError(
      `sandbox settings: environment must be one of ${VENDOR_ENVIRONMENTS.join(', ')}`,
    );
  }
  const port = settings.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigurationError('sandbox settings: port must be an integer from 0 to 65535');
  }
  const { environment, clock, users, random, port: _port, ...mutable } = settings;
  const parsedUsers = sandboxUsersSchema.safeParse(users ?? defaultSandboxUsers(environment));
  if (!parsedUsers.success) {
    throw new ConfigurationError(`sandbox settings: users: ${describeIssues(parsedUsers.error)}`);
  }
  return {
    ...DEFAULTS,
    ...parseMutableSettings(mutable),
    environment,
    port,
    clock: clock ?? systemClock,
    users: parsedUsers.data,
    random: random ?? Math.random,
  };
}

/** The mutable part, as reported by the operator API. */
export function mutableView(settings: ResolvedSettings): Required<MutableSandboxSettings> {
  const view = {} as Record<string, unknown>;
  for (const key of Object.keys(DEFAULTS)) view[key] = settings[key as keyof ResolvedSettings];
  view.envClaim = settings.envClaim ?? settings.environment;
  return view as Required<MutableSandboxSettings>;
}

/** Unix epoch ms of the vendor's clock: the injected clock plus the configured offset. */
export const vendorNow = (settings: ResolvedSettings): number =>
  settings.clock.now() + settings.clockOffsetSeconds * 1000;
