import * as z from 'zod';
import { parseRetryAfterSeconds } from '../shared/vendor-client/parse-response.js';
import { tokenId as tokenIdOf } from '../shared/vendor-client/token-id.js';
import { BrokerApiError } from './errors.js';
import type { CredentialSetSummary, QuotaWindow, VendedToken } from './types.js';

/** The wire shapes of the vend API's answers. Loose: a newer broker may add fields. */
const quotaWindow = z
  .object({
    limit: z.number(),
    windowSeconds: z.number(),
    remaining: z.number(),
    class: z.string().optional(),
  })
  .loose();

export const tokenAnswer = z
  .object({
    credentialSet: z.string(),
    environment: z.string(),
    accessToken: z.string().min(1),
    tokenId: z.string().regex(/^[0-9a-f]{16}$/),
    expiresAt: z.number(),
    expiresInSeconds: z.number().min(0),
    tenant: z.string(),
    companyKey: z.string(),
    executionPlatformKey: z.string(),
    userKey: z.string(),
    quota: z.array(quotaWindow).nullable().optional(),
    vendorBaseUrl: z.string().optional(),
    /** Absent from brokers before request classes by path. */
    classes: z
      .array(
        // `learned`: absent from brokers before learned class limits.
        z.object({ class: z.string(), paths: z.array(z.string()), learned: z.boolean().optional() }).loose(),
      )
      .optional(),
    reloggedIn: z.boolean().optional(),
  })
  .loose();

export const permitAnswer = z
  .object({
    granted: z.number().int().min(1),
    grantedAt: z.number(),
    validUntil: z.number(),
    /** Opaque: presented to give unused permits of the grant back. */
    receipt: z.string().min(1).max(256),
    remaining: z.array(quotaWindow),
    /**
     * The most one grant could give this caller now, and ever: they count its reservation and the shared part of
     * windows with reservations. Absent from brokers before they were added (then only `remaining` guides).
     */
    available: z.number().int().min(0).optional(),
    maxCount: z.number().int().min(1).optional(),
  })
  .loose();
export type PermitGrant = z.infer<typeof permitAnswer>;

export const returnAnswer = z.object({ returned: z.number().int().min(0) }).loose();

/** A forced re-login's answer: the new token by id and expiry, never the token. */
export const refreshAnswer = z
  .object({
    credentialSet: z.string(),
    environment: z.string(),
    tokenId: z.string().regex(/^[0-9a-f]{16}$/),
    expiresAt: z.number(),
    expiresInSeconds: z.number().min(0),
    loggedIn: z.boolean(),
    /** Absent from brokers before it was added. */
    refreshedAt: z.string().optional(),
    replacedTokenId: z
      .string()
      .regex(/^[0-9a-f]{16}$/)
      .optional(),
  })
  .loose();
export type RefreshAnswer = z.infer<typeof refreshAnswer>;

/** A part of a window with reservations: a consumer's reservation, or the shared part. */
const partUsage = z.object({ limit: z.number(), used: z.number(), remaining: z.number() }).loose();

/** What the broker reports of a quota window in the set list: also what was used of it, where it says so. */
const windowUsage = quotaWindow.extend({
  /** Permits granted in the window (plus the ledger's margin); absent from brokers before it was added. */
  used: z.number().optional(),
  /** Only on a general window with reservations, from brokers that say so: the shared part. */
  shared: partUsage.optional(),
  /** The same: each reserved consumer's part. */
  reservations: z.array(partUsage.extend({ consumer: z.string() })).optional(),
});

/**
 * One set of `GET /v1/credential-sets`, as the consumer library and the operator CLI read it. The fields
 * only the CLI shows are optional: older brokers do not send them.
 */
const listedSet = z
  .object({
    id: z.string(),
    environment: z.string(),
    companyRole: z.string(),
    health: z
      .object({
        state: z.string(),
        expiresAt: z.number().nullable(),
        expiresInSeconds: z.number().nullable().optional(),
        refreshedAt: z.string().nullable().optional(),
        lastError: z
          .object({ code: z.string(), at: z.string(), requestId: z.string().optional() })
          .nullable(),
        consecutiveFailures: z.number().optional(),
        nextAttemptAt: z.string().nullable().optional(),
        rejectionsOfSecretVersion: z.number().optional(),
        rateLimitedUntil: z.string().nullable().optional(),
      })
      .loose(),
    quotaScope: z.enum(['token', 'user']).optional(),
    quota: z.array(windowUsage).nullable().optional(),
  })
  .loose();
export type ListedSet = z.infer<typeof listedSet>;

export const listAnswer = z.object({ credentialSets: z.array(listedSet) }).loose();

const errorBody = z
  .object({
    errorCode: z.string().regex(/^[A-Z][A-Z0-9_]{0,63}$/),
    errorMessage: z.string(),
    requestId: z.string().optional(),
    details: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

/** What AWS itself answers in front of a Function URL (IAM refusal, function failure). */
const awsBody = z.object({ Message: z.string() }).loose();

export function unexpected(status: number, reason: string, requestId?: string): BrokerApiError {
  return new BrokerApiError({ status, code: 'UNEXPECTED_BROKER_RESPONSE', message: reason, requestId });
}

/** Names the fields that were wrong, never their values (the body may hold a token). */
export function shapeProblem(error: z.ZodError): string {
  const fields = error.issues.slice(0, 3).map((issue) => issue.path.map(String).join('.') || '(body)');
  return `the answer does not have the expected shape (${fields.join(', ')})`;
}

/** A non-2xx answer of the broker, or of AWS in front of it, as the error it stands for. */
export function brokerError(status: number, headers: Headers, json: unknown, nowMs: number): BrokerApiError {
  const headerRequestId =
    headers.get('x-request-id') ??
    headers.get('x-amzn-requestid') ??
    headers.get('x-amzn-request-id') ??
    undefined;
  const retryAfterSeconds = parseRetryAfterSeconds(headers.get('retry-after'), nowMs);
  const flat = errorBody.safeParse(json);
  if (flat.success) {
    return new BrokerApiError({
      status,
      code: flat.data.errorCode,
      message: flat.data.errorMessage,
      requestId: flat.data.requestId ?? headerRequestId,
      retryAfterSeconds,
      details: flat.data.details,
    });
  }
  const aws = awsBody.safeParse(json);
  if (aws.success) {
    return new BrokerApiError({
      status,
      // 403 here is IAM: a bad signature, or a role without lambda:InvokeFunctionUrl.
      code: status === 403 ? 'FORBIDDEN' : 'BROKER_FUNCTION_ERROR',
      message: aws.data.Message,
      requestId: headerRequestId,
      retryAfterSeconds,
    });
  }
  return new BrokerApiError({
    status,
    code: 'UNEXPECTED_BROKER_RESPONSE',
    message: 'the error answer is of no known shape',
    requestId: headerRequestId,
    retryAfterSeconds,
  });
}

/** The token answer as a VendedToken, its token hidden from enumeration, its expiry on this client's clock. */
export function toVendedToken(answer: z.infer<typeof tokenAnswer>, receivedAt: number): VendedToken {
  if (tokenIdOf(answer.accessToken) !== answer.tokenId) {
    throw unexpected(200, 'the token answer has a tokenId that is not the id of its token');
  }
  const token = {
    credentialSet: answer.credentialSet,
    environment: answer.environment,
    tokenId: answer.tokenId,
    expiresAt: answer.expiresAt,
    expiresInSeconds: answer.expiresInSeconds,
    tenant: answer.tenant,
    companyKey: answer.companyKey,
    executionPlatformKey: answer.executionPlatformKey,
    userKey: answer.userKey,
    quota: (answer.quota ?? null) as QuotaWindow[] | null,
    vendorBaseUrl: answer.vendorBaseUrl,
    classes: answer.classes?.map((entry) =>
      Object.freeze({
        class: entry.class,
        paths: Object.freeze([...entry.paths]),
        learned: entry.learned === true,
      }),
    ),
    receivedAt,
    expiresAtMs: Math.min(answer.expiresAt * 1000, receivedAt + answer.expiresInSeconds * 1000),
  };
  Object.defineProperty(token, 'accessToken', { value: answer.accessToken, enumerable: false });
  return Object.freeze(token) as VendedToken;
}

export function toSummaries(answer: z.infer<typeof listAnswer>): CredentialSetSummary[] {
  return answer.credentialSets.map((set) => ({
    id: set.id,
    environment: set.environment,
    companyRole: set.companyRole,
    health: {
      state: set.health.state,
      expiresAt: set.health.expiresAt,
      lastError: set.health.lastError
        ? {
            code: set.health.lastError.code,
            at: set.health.lastError.at,
            ...(set.health.lastError.requestId ? { requestId: set.health.lastError.requestId } : {}),
          }
        : null,
    },
  }));
}
