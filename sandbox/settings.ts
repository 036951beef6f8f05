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

/** Every setting that may change while the sandbox runs (API `update`, `POST /_sandbox/settings`). */
export const mutableSettingsSchema = z.strictObject({
  tokenLifetimeSeconds: z.number().int().positive().optional(),
  limits: z.array(sandboxLimitSchema).max(16).optional(),
  windowKind: z.enum(['fixed', 'sliding']).optional(),
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

const DEFAULTS: Required<Omit<MutableSandboxSettings, 'envClaim'>> = {
  tokenLifetimeSeconds: 14_400,
  limits: [
    { limit: 50, windowSeconds: 60 },
    { limit: 1000, windowSeconds: 3600 },
  ],
  windowKind: 'fixed',
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
