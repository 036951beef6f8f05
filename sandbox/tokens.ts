import { randomBytes, randomUUID } from 'node:crypto';
import { compactVerify, SignJWT } from 'jose';
import * as z from 'zod';
import type { VendorEnvironment } from '../shared/vendor-client/types.js';
import type { SandboxUser } from './users.js';

const claimsSchema = z.object({
  sub: z.string(),
  username: z.string(),
  tenant: z.string(),
  companyKey: z.string(),
  env: z.string(),
  jti: z.string().min(1),
  iat: z.number().int(),
  exp: z.number().int(),
});
export type SandboxTokenClaims = z.infer<typeof claimsSchema>;

export type TokenCheck =
  | { ok: true; claims: SandboxTokenClaims }
  | { ok: false; code: 'TOKEN_INVALID' | 'TOKEN_EXPIRED'; reason: string; jti?: string };

const decoder = new TextDecoder();

/**
 * Issues and checks the access tokens of one environment. Each instance signs with its own random HS256
 * key, so a token of another sandbox (another environment) fails the signature, as the vendor's do (§5.7).
 * The `env` claim is checked as well, for keys shared on purpose (tests).
 */
export class TokenAuthority {
  readonly #key: Uint8Array;
  readonly #environment: VendorEnvironment;
  /** Every env claim this authority wrote (the environment's name, or what `envClaim` set). */
  readonly #envClaims = new Set<string>();
  /** Serial number of every token issued, by jti: later logins revoke by serial. */
  readonly #serials = new Map<string, number>();
  /** Per username: tokens with a smaller serial are revoked (invalidatePreviousTokenOnLogin). */
  readonly #revokedBelow = new Map<string, number>();
  #nextSerial = 1;

  constructor(environment: VendorEnvironment, key: Uint8Array = randomBytes(32)) {
    this.#environment = environment;
    this.#envClaims.add(environment);
    this.#key = key;
  }

  async issue(
    user: SandboxUser,
    nowMs: number,
    lifetimeSeconds: number,
    revokeEarlier: boolean,
    envClaim: string = this.#environment,
  ): Promise<{ token: string; claims: SandboxTokenClaims }> {
    this.#envClaims.add(envClaim);
    const iat = Math.floor(nowMs / 1000);
    const claims: SandboxTokenClaims = {
      sub: user.username,
      username: user.username,
      tenant: user.tenant,
      companyKey: user.companyKey,
      env: envClaim,
      jti: randomUUID(),
      iat,
      exp: iat + lifetimeSeconds,
    };
    const token = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .sign(this.#key);
    const serial = this.#nextSerial++;
    this.#serials.set(claims.jti, serial);
    if (revokeEarlier) this.#revokedBelow.set(user.username, serial);
    return { token, claims };
  }

  /** Signature, shape, environment, expiry (valid while now < exp), then revocation by a later login. */
  async verify(token: string, nowMs: number): Promise<TokenCheck> {
    let payload: Uint8Array;
    try {
      ({ payload } = await compactVerify(token, this.#key, { algorithms: ['HS256'] }));
    } catch {
      return { ok: false, code: 'TOKEN_INVALID', reason: 'malformed token or bad signature' };
    }
    let claims: SandboxTokenClaims;
    try {
      claims = claimsSchema.parse(JSON.parse(decoder.decode(payload)));
    } catch {
      return { ok: false, code: 'TOKEN_INVALID', reason: 'token claims are malformed' };
    }
    const { jti } = claims;
    if (!this.#envClaims.has(claims.env)) {
      return { ok: false, code: 'TOKEN_INVALID', reason: 'token belongs to another environment', jti };
    }
    if (Math.floor(nowMs / 1000) >= claims.exp) {
      return { ok: false, code: 'TOKEN_EXPIRED', reason: 'token has expired', jti };
    }
    const serial = this.#serials.get(jti);
    if (serial === undefined)
      return { ok: false, code: 'TOKEN_INVALID', reason: 'token was never issued', jti };
    if (serial < (this.#revokedBelow.get(claims.username) ?? 0)) {
      return { ok: false, code: 'TOKEN_INVALID', reason: 'token was replaced by a later login', jti };
    }
    return { ok: true, claims };
  }
}
