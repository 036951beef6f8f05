import * as z from 'zod';
import { lazy } from '../lazy.js';
import { BadRequestError } from './vend-errors.js';

// Each schema is built by the first request that needs it (lazy), not at cold start: most requests have no body.

/** A token id as the broker hands it out: the first 16 hex digits of sha256(token). */
const tokenId = lazy(() => z.string().regex(/^[0-9a-f]{16}$/));
const positiveCount = lazy(() => z.number().int().min(1).max(100_000));

/** Bodies are strict: an unknown field is refused (a typo such as `cout` must not pass as "no count"). */
export const permitRequestBody = lazy(() =>
  z.strictObject({
    tokenId: tokenId(),
    count: positiveCount(),
    class: z
      .string()
      .regex(/^[a-z][a-z0-9-]{0,62}$/)
      .optional(),
  }),
);

export const permitReturnBody = lazy(() =>
  z.strictObject({
    tokenId: tokenId(),
    /** At most the grant's count; the receipt is spent whatever the count. */
    count: positiveCount(),
    /** The grant's receipt, as the permit answer gave it: it names the grant, its slot and its caller. */
    receipt: z.string().regex(/^[A-Za-z0-9._*-]{1,256}$/),
  }),
);

/** The vendor's 401 codes that say something about the token itself (TOKEN_MISSING is the consumer's bug). */
export const REJECTION_CODES = ['TOKEN_EXPIRED', 'TOKEN_INVALID'] as const;

export const tokenRejectionBody = lazy(() =>
  z.strictObject({
    tokenId: tokenId(),
    errorCode: z.enum(REJECTION_CODES),
    /** The vendor's requestId of the rejected call, for the logs. */
    requestId: z
      .string()
      .regex(/^[\w.:/-]{1,128}$/)
      .optional(),
  }),
);

export const rateLimitReportBody = lazy(() =>
  z
    .strictObject({
      tokenId: tokenId(),
      retryAfterSeconds: z.number().min(0).max(86_400).optional(),
      limit: z.number().int().min(1).max(1_000_000).optional(),
      remaining: z.number().int().min(0).max(1_000_000).optional(),
      /** Unix seconds. */
      reset: z.number().int().min(0).max(99_999_999_999).optional(),
      /** The configured class of the answer the headers came on (docs/class-limits.md): they may teach its limit. */
      class: z
        .string()
        .regex(/^[a-z][a-z0-9-]{0,62}$/)
        .optional(),
    })
    .refine((r) => r.retryAfterSeconds !== undefined || r.remaining !== undefined, {
      message: 'retryAfterSeconds or remaining is required',
      path: ['retryAfterSeconds'],
    })
    // A remaining count means nothing without the time it holds until.
    .refine((r) => r.remaining === undefined || r.reset !== undefined, {
      message: 'is required with remaining',
      path: ['reset'],
    }),
);

/** A field name from the caller's body is echoed only when it cannot be a token or anything long. */
const safeName = (name: string): string => (/^[A-Za-z][A-Za-z0-9_-]{0,39}$/.test(name) ? name : '(field)');

/**
 * Validates a body and turns the first problem into a 400 that names the field: MISSING_REQUIRED_FIELD,
 * INVALID_FORMAT (wrong type or shape), INVALID_VALUE (right type, value not allowed). Messages are ours, never
 * the input's value.
 */
export function parseBody<T>(schema: z.ZodType<T>, body: Record<string, unknown>): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw new BadRequestError('INVALID_VALUE', 'body', 'not acceptable');
  if (issue.code === 'unrecognized_keys') {
    throw new BadRequestError('INVALID_VALUE', safeName(issue.keys[0] ?? ''), 'unknown field');
  }
  const field = issue.path.map((part) => safeName(String(part))).join('.') || 'body';
  const given = issue.path.length === 1 ? body[String(issue.path[0])] : body;
  if (issue.code === 'custom') throw new BadRequestError('MISSING_REQUIRED_FIELD', field, issue.message);
  if (given === undefined) throw new BadRequestError('MISSING_REQUIRED_FIELD', field, 'is required');
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int' || (typeof given === 'number' && !Number.isFinite(given)))
        throw new BadRequestError('INVALID_VALUE', field, 'must be a whole number');
      throw new BadRequestError('INVALID_FORMAT', field, `must be a ${issue.expected}`);
    case 'invalid_format':
      throw new BadRequestError('INVALID_FORMAT', field, 'has the wrong format');
    case 'too_small':
      throw new BadRequestError('INVALID_VALUE', field, `must be at least ${String(issue.minimum)}`);
    case 'too_big':
      throw new BadRequestError('INVALID_VALUE', field, `must be at most ${String(issue.maximum)}`);
    case 'invalid_value':
      if (issue.values.every((allowed) => typeof allowed !== typeof given)) {
        throw new BadRequestError('INVALID_FORMAT', field, `must be a ${typeof issue.values[0]}`);
      }
      throw new BadRequestError(
        'INVALID_VALUE',
        field,
        `must be one of ${issue.values.map((v) => String(v)).join(', ')}`,
      );
    default:
      throw new BadRequestError('INVALID_VALUE', field, 'not acceptable');
  }
}
