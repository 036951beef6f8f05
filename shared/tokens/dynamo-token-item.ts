import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import * as z from 'zod';
import { lazySchema } from '../lazy-schema.js';
import { type CredentialSetState, notExpired, type StoredToken, type TokenView } from './token-state.js';

/**
 * Item layout of the tokens table: one item per set, key `pk = "set#<id>"` (shared/aws/keys.ts setKey). In a
 * two-Region stage the table is the MRSC table, beside the lease items: IAM scopes the token functions to this
 * prefix (infra/broker-stack.ts).
 */

/** Items nobody wrote for this long are deleted by TTL. Any token is rewritten within its (≤ 24 h) lifetime. */
export const PURGE_AFTER_SECONDS = 2 * 24 * 3600;
export const purgeAtFor = (now: number): number => Math.ceil(now / 1000) + PURGE_AFTER_SECONDS;

const tokenSchema = lazySchema(() =>
  z.object({
    tokenId: z.string(),
    accessToken: z.string(),
    exp: z.number(),
    issuedAt: z.number().optional(),
    env: z.string(),
    obtainedAt: z.number(),
    usableUntil: z.number(),
    vendorClockSkewSeconds: z.number().optional(),
    // Since the release after N-1 (which drops it: its schema strips unknown keys). For the ledger only: a value
    // this release cannot read is left out, and the token read through the fallbacks, never refused for it.
    vendorOffsetMs: z
      .object({ lo: z.number(), hi: z.number() })
      .refine((offset) => offset.lo <= offset.hi)
      .optional()
      .catch(undefined),
    lifetimeSeconds: z.number().optional(),
    tenant: z.string(),
    companyKey: z.string(),
    executionPlatformKey: z.string(),
    userKey: z.string(),
    username: z.string(),
    roles: z.array(z.string()),
    groups: z.array(z.number()),
    defaultCompanyInventorySource: z.string(),
  }),
);

const itemSchema = lazySchema(() =>
  z.object({
    credentialSetId: z.string(),
    current: tokenSchema.optional(),
    previous: tokenSchema.optional(),
    lease: z.object({ holder: z.string(), leaseId: z.string(), expiresAt: z.number() }).optional(),
    lastAttemptAt: z.number().optional(),
    failure: z
      .object({
        errorCode: z.string(),
        requestId: z.string().optional(),
        kind: z.enum(['TRANSIENT', 'REJECTED']),
        at: z.number(),
        consecutive: z.number(),
        cooldownUntil: z.number(),
        secretVersion: z.string().optional(),
        rejectionsOfVersion: z.number().optional(),
      })
      .optional(),
    version: z.number().default(0),
    purgeAt: z.number().optional(),
  }),
);

/**
 * The lease ids the item carries, read raw (whatever else it holds): `held`, the lease's, and `released`, that of
 * the holder write (promote or failure) that last freed a lease (attribute `releasedLeaseId`). They tell a
 * holder whose write had no answer whether it applied. Release N-1 neither reads nor writes `releasedLeaseId`:
 * a value its writes leave behind is an older lease's, and lease ids are fresh per take, never matched again.
 */
export function leaseIdsOf(item: Record<string, AttributeValue>): { held?: string; released?: string } {
  const held = item.lease?.M?.leaseId?.S;
  const released = item.releasedLeaseId?.S;
  return { ...(held !== undefined ? { held } : {}), ...(released !== undefined ? { released } : {}) };
}

/**
 * Expiry on the vendor's clock as measured at login; `usableUntil` already has the skew in it. A token with
 * exactly its floor left is still usable (as the vend path always served it): less is never served.
 */
const view = (token: StoredToken | undefined, now: number): TokenView | undefined =>
  token && notExpired(token, now) ? { ...token, usable: now <= token.usableUntil } : undefined;

/**
 * The state a reader may rely on at `now`: TTL deletes lazily (and dynalite never does), so expiry is
 * checked here. A malformed item gives the names of its wrong fields (the caller decides what to do).
 */
export function itemToState(
  item: Record<string, AttributeValue>,
  now: number,
): { ok: true; state: CredentialSetState | undefined } | { ok: false; fields: string } {
  const parsed = itemSchema.safeParse(unmarshall(item));
  // Issue paths only: zod messages never quote values, and a value here could be a token.
  if (!parsed.success)
    return { ok: false, fields: parsed.error.issues.map((i) => i.path.join('.')).join(', ') };
  const data = parsed.data;
  if (data.purgeAt !== undefined && data.purgeAt * 1000 <= now) return { ok: true, state: undefined };
  const state: CredentialSetState = { credentialSetId: data.credentialSetId, version: data.version };
  const current = view(data.current, now);
  const previous = view(data.previous, now);
  if (current) state.current = current;
  else if (data.current) state.expiredCurrentTokenId = data.current.tokenId;
  if (previous) state.previous = previous;
  if (data.lease && data.lease.expiresAt > now) state.lease = data.lease;
  if (data.lastAttemptAt !== undefined) state.lastAttemptAt = data.lastAttemptAt;
  if (data.failure) state.failure = data.failure;
  return { ok: true, state };
}
