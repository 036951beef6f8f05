import { ConfigurationError } from '../shared/errors.js';
import { type Answer, errorAnswer, type RequestContext } from './answers.js';
import { type InjectedFault, parseInjectedFault } from './faults.js';
import { type MutableSandboxSettings, parseMutableSettings } from './settings.js';
import type { SandboxStats } from './stats.js';

export const OPERATOR_PREFIX = '/_sandbox/';

/** What the operator endpoints may do to a running sandbox (the same as the programmatic API). */
export interface OperatorControls {
  stats(): SandboxStats;
  resetStats(): void;
  update(settings: Partial<MutableSandboxSettings>): void;
  settings(): Required<MutableSandboxSettings>;
  inject(fault: InjectedFault): void;
  pendingFaults(): number;
}

const ROUTES: Record<string, string> = {
  stats: 'GET',
  settings: 'POST',
  faults: 'POST',
  'reset-stats': 'POST',
};

function parseJsonBody(body: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(body === '' ? '{}' : body) };
  } catch {
    return { ok: false };
  }
}

/** `/_sandbox/*`: apart from the vendor's API, never faulted, never counted in the stats. */
export function handleOperator(
  method: string,
  pathname: string,
  body: string,
  ctx: RequestContext,
  controls: OperatorControls,
): Answer {
  const name = pathname.slice(OPERATOR_PREFIX.length).replace(/\/$/, '');
  const expected = ROUTES[name];
  if (!expected || !Object.hasOwn(ROUTES, name)) {
    return errorAnswer(ctx, 404, 'RESOURCE_NOT_FOUND', `No operator endpoint ${pathname}`);
  }
  if (method !== expected) {
    return errorAnswer(ctx, 405, 'METHOD_NOT_ALLOWED', `${pathname} accepts ${expected} only`, {
      headers: { Allow: expected },
    });
  }
  if (name === 'stats') return { status: 200, json: controls.stats() };
  if (name === 'reset-stats') {
    controls.resetStats();
    return { status: 200, json: { reset: true } };
  }
  const parsed = parseJsonBody(body);
  if (!parsed.ok) return errorAnswer(ctx, 400, 'INVALID_FORMAT', 'Request body is not valid JSON');
  try {
    if (name === 'settings') {
      controls.update(parseMutableSettings(parsed.value));
      return { status: 200, json: { settings: controls.settings() } };
    }
    controls.inject(parseInjectedFault(parsed.value));
    return { status: 201, json: { pendingFaults: controls.pendingFaults() } };
  } catch (error) {
    if (error instanceof ConfigurationError) return errorAnswer(ctx, 400, 'INVALID_VALUE', error.message);
    throw error;
  }
}
