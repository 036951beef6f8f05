import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Answer, type RequestContext, vendorError } from './answers.js';
import type { ResolvedSettings } from './settings.js';
import type { TokenAuthority } from './tokens.js';
import type { SandboxUser } from './users.js';

export const LOGIN_PATHS = new Set(['/restful/login/', '/restful/login']);

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** The username a login body names, for the stats; undefined when the body does not parse. */
export function loginUsername(body: string): string | undefined {
  const parsed = parseJson(body);
  if (!parsed.ok || !isRecord(parsed.value)) return undefined;
  const { username } = parsed.value;
  return typeof username === 'string' && username !== '' ? username : undefined;
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

function findUser(users: SandboxUser[], username: string, password: string): SandboxUser | undefined {
  const user = users.find((u) => u.username === username);
  // Compare digests in constant time even for a sandbox: its users copy it into real code.
  return user && timingSafeEqual(digest(user.password), digest(password)) ? user : undefined;
}

export interface LoginOutcome {
  answer: Answer;
  /** The jti of the token issued, for the log line. */
  jti?: string;
}

/** POST /restful/login/ (§4): 400 INVALID_FORMAT, 400 MISSING_REQUIRED_FIELD, 401 INVALID_CREDENTIALS or 200. */
export async function handleLogin(
  body: string,
  ctx: RequestContext,
  settings: ResolvedSettings,
  tokens: TokenAuthority,
): Promise<LoginOutcome> {
  const parsed = parseJson(body);
  if (!parsed.ok) return { answer: vendorError(ctx, 'INVALID_FORMAT', 'Request body is not valid JSON') };
  const fields = isRecord(parsed.value) ? parsed.value : {};
  const missing = ['username', 'password'].filter((f) => typeof fields[f] !== 'string' || fields[f] === '');
  if (missing.length > 0) {
    return {
      answer: vendorError(
        ctx,
        'MISSING_REQUIRED_FIELD',
        `Required field missing or not a string: ${missing.join(', ')}`,
      ),
    };
  }
  const user = findUser(settings.users, fields.username as string, fields.password as string);
  if (!user) return { answer: vendorError(ctx, 'INVALID_CREDENTIALS', 'Invalid username or password') };

  const { token, claims } = await tokens.issue(
    user,
    ctx.now(),
    settings.tokenLifetimeSeconds,
    settings.invalidatePreviousTokenOnLogin,
    settings.envClaim ?? settings.environment,
  );
  return {
    jti: claims.jti,
    answer: {
      status: 200,
      json: {
        userDetails: { username: user.username, userKey: user.userKey, groups: [...user.groups] },
        roles: [...user.roles],
        accessToken: token,
        // Opaque and useless on purpose: the vendor does not support refresh (§5).
        refreshToken: `rt-${randomBytes(24).toString('hex')}`,
        executionPlatformKey: user.executionPlatformKey,
        tenant: user.tenant,
        defaultCompanyInventorySource: user.defaultCompanyInventorySource,
        status: 'SUCCESS',
        companyKey: user.companyKey,
        exp: claims.exp,
      },
    },
  };
}
