import * as z from 'zod';
import { ConfigurationError } from '../shared/errors.js';
import { VENDOR_ERROR_CODES, type VendorErrorCode } from '../shared/vendor-client/errors.js';
import {
  type Answer,
  ERROR_CODE_STATUS,
  errorAnswer,
  genericCodeFor,
  type RequestContext,
  rateLimitAnswer,
} from './answers.js';
import { describeIssues, type SandboxLimit } from './settings.js';

export type FaultTarget = 'login' | 'resources' | 'all';

/** Answers the next `count` (default 1) matching requests instead of the real handling. */
export interface InjectedFault {
  /** Default 'all'. */
  target?: FaultTarget;
  count?: number;
  /** A §7 error body with the documented status for that code (429: the §8 nested shape + Retry-After). */
  errorCode?: VendorErrorCode;
  /** A status with a generic §7 body (e.g. 500, 503). */
  status?: number;
  /** Anything, e.g. an HTML 502 from a proxy, or JSON of an unknown shape. */
  raw?: { status: number; body: string; contentType?: string };
}

export const injectedFaultSchema = z
  .strictObject({
    target: z.enum(['login', 'resources', 'all']).optional(),
    count: z.number().int().positive().max(1_000_000).optional(),
    errorCode: z.enum(VENDOR_ERROR_CODES).optional(),
    status: z.number().int().min(400).max(599).optional(),
    raw: z
      .strictObject({
        status: z.number().int().min(200).max(599),
        body: z.string().max(65_536),
        contentType: z.string().min(1).max(200).optional(),
      })
      .optional(),
  })
  .refine((f) => [f.errorCode, f.status, f.raw].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of errorCode, status or raw',
  });

export function parseInjectedFault(input: unknown): InjectedFault {
  const parsed = injectedFaultSchema.safeParse(input);
  if (!parsed.success) throw new ConfigurationError(`sandbox fault: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

const SAMPLE_DETAILS: Partial<Record<VendorErrorCode, unknown>> = {
  // §7: a 422 guideline error may carry violations with rule, current_value and limit.
  GUIDELINE_VIOLATION: { violations: [{ rule: 'MAX_EQUITY_SHARE', current_value: 0.82, limit: 0.75 }] },
};

/** The answer of a fault. An injected 429 names the shortest window, reset at its (epoch-aligned) end. */
export function faultAnswer(fault: InjectedFault, ctx: RequestContext, limits: SandboxLimit[]): Answer {
  if (fault.raw) {
    const contentType = fault.raw.contentType ?? 'text/plain; charset=utf-8';
    return { status: fault.raw.status, raw: { body: fault.raw.body, contentType } };
  }
  if (fault.errorCode === 'RATE_LIMIT_EXCEEDED') {
    const shortest = limits.reduce<SandboxLimit>(
      (a, b) => (b.windowSeconds < a.windowSeconds ? b : a),
      limits[0] ?? { limit: 50, windowSeconds: 60 },
    );
    const windowMs = shortest.windowSeconds * 1000;
    const roomAt = (Math.floor(ctx.now() / windowMs) + 1) * windowMs;
    const retryAfter = Math.max(1, Math.ceil((roomAt - ctx.now()) / 1000));
    return rateLimitAnswer(
      { limit: shortest.limit, remaining: 0, reset: Math.ceil(roomAt / 1000) },
      retryAfter,
    );
  }
  if (fault.errorCode) {
    return errorAnswer(
      ctx,
      ERROR_CODE_STATUS[fault.errorCode],
      fault.errorCode,
      `injected fault: ${fault.errorCode}`,
      { details: SAMPLE_DETAILS[fault.errorCode] },
    );
  }
  const status = fault.status ?? 500;
  return errorAnswer(ctx, status, genericCodeFor(status), `injected fault: HTTP ${status}`);
}

/** Faults in the order they were injected; the first one that matches a request answers it. */
export class FaultQueue {
  #pending: { fault: InjectedFault; left: number }[] = [];

  add(fault: InjectedFault): void {
    this.#pending.push({ fault, left: fault.count ?? 1 });
  }

  /** Takes one use of the first fault aimed at this kind of request, if any. */
  take(route: 'login' | 'resources'): InjectedFault | undefined {
    const entry = this.#pending.find((p) => (p.fault.target ?? 'all') === 'all' || p.fault.target === route);
    if (!entry) return undefined;
    entry.left--;
    if (entry.left <= 0) this.#pending = this.#pending.filter((p) => p !== entry);
    return entry.fault;
  }

  get size(): number {
    return this.#pending.length;
  }
}
