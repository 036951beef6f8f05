import { decodeJwt, type JWTPayload } from 'jose';
import { VendorTokenUnusableError } from './errors.js';

/** What the broker reads from a fresh token: when it stops working, and where and when it was made. */
export interface TokenTimes {
  /** Unix seconds: the earlier of the body's `exp` and the JWT's `exp` claim. */
  exp: number;
  env?: string;
  /** The JWT's `iat`, Unix seconds. */
  issuedAt?: number;
}

const usableSeconds = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : undefined;

/**
 * Reads the expiry from both places the vendor states it (§2) and keeps the earlier one, so a
 * disagreement can only make the broker re-login sooner. The JWT is decoded, not verified: the
 * broker holds no vendor key, and it only needs the claims to plan. Messages never quote the token.
 */
export function readTokenTimes(accessToken: string, bodyExp: unknown, nowMs: number): TokenTimes {
  let claims: JWTPayload;
  try {
    claims = decodeJwt(accessToken);
  } catch (cause) {
    throw new VendorTokenUnusableError(
      'the vendor returned an access token that is not a well-formed JWT',
      200,
      {
        cause,
      },
    );
  }
  const candidates = [usableSeconds(bodyExp), usableSeconds(claims.exp)].filter((v) => v !== undefined);
  if (candidates.length === 0) {
    throw new VendorTokenUnusableError(
      'the vendor returned a token with no usable exp (neither the body nor the JWT has a numeric exp)',
      200,
    );
  }
  const exp = Math.min(...candidates);
  if (exp * 1000 <= nowMs) {
    throw new VendorTokenUnusableError(
      `the vendor returned a token that is already expired (exp ${new Date(exp * 1000).toISOString()})`,
      200,
    );
  }
  const times: TokenTimes = { exp };
  if (typeof claims.env === 'string' && claims.env !== '') times.env = claims.env;
  const issuedAt = usableSeconds(claims.iat);
  if (issuedAt !== undefined) times.issuedAt = issuedAt;
  return times;
}
