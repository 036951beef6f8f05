import * as z from 'zod';
import { describeIssues } from '../config/credential-sets.js';
import { lazySchema } from '../lazy-schema.js';
import { InvalidRefreshRequestError } from './errors.js';

/** Why a caller (the vend API) asks for a refresh of one set. */
export type RefreshRequest =
  | { credentialSetId: string; reason: 'NO_USABLE_TOKEN'; minValiditySeconds?: number }
  | { credentialSetId: string; reason: 'TOKEN_REJECTED'; rejectedTokenId: string };

// No raw token crosses this boundary (it is a Lambda invoke payload in AWS): the caller re-reads the store.
export type RefreshOutcome =
  | { status: 'CURRENT'; tokenId: string; exp: number; loggedIn: boolean }
  | { status: 'UNAVAILABLE'; errorCode: string; retryAfterSeconds: number };

const setIdSchema = lazySchema(() => z.string().min(1).max(63));

export const refreshRequestSchema = lazySchema(() =>
  z.discriminatedUnion('reason', [
    z.object({
      credentialSetId: setIdSchema,
      reason: z.literal('NO_USABLE_TOKEN'),
      minValiditySeconds: z.number().int().nonnegative().max(86_400).optional(),
    }),
    z.object({
      credentialSetId: setIdSchema,
      reason: z.literal('TOKEN_REJECTED'),
      rejectedTokenId: z.string().regex(/^[0-9a-f]{16}$/, 'a token id: 16 lowercase hex characters'),
    }),
  ]),
);

/** Validates an on-demand request (from an invoke payload); extra fields such as `action` are dropped. */
export function parseRefreshRequest(input: unknown): RefreshRequest {
  const result = refreshRequestSchema.safeParse(input);
  if (!result.success) {
    throw new InvalidRefreshRequestError(
      `invalid refresh request: ${describeIssues(result.error, 'request')}`,
    );
  }
  return result.data;
}
