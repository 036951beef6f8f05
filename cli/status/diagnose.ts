import { type RunbookAnchor, RunbookSection } from '../../infra/runbook.js';
import { formatDuration, isoSeconds } from '../format.js';
import type { SetHealthView } from './list-health.js';

/** One reason a set is not healthy, in the on-call person's words, with the runbook section that fixes it. */
export interface Cause {
  /** The error code behind it (the vendor's or the broker's), when there is one. */
  code: string | null;
  summary: string;
  runbook: RunbookAnchor | null;
}

/** Login failures on the vendor's side (its 5xx, timeouts, network): nothing wrong with the set itself. */
const VENDOR_DOWN = new Set([
  'SERVICE_UNAVAILABLE',
  'INTERNAL_ERROR',
  'BAD_GATEWAY',
  'GATEWAY_TIMEOUT',
  'VENDOR_TIMEOUT',
  'VENDOR_UNREACHABLE',
  'VENDOR_CALL_ABORTED',
  'UNEXPECTED_VENDOR_RESPONSE',
]);

/** The code a state stands for when the broker sent none with it. */
const IMPLIED_CODE: Record<string, string> = {
  CREDENTIALS_REJECTED: 'INVALID_CREDENTIALS',
  ENV_MISMATCH: 'ENV_MISMATCH',
};

function loginFailure(set: SetHealthView, code: string, served: boolean, nowMs: number): Cause {
  const { expiresAt } = set.health;
  // On the vendor's clock when the broker says; an older broker's answer is counted on ours.
  const left = set.health.expiresInSeconds ?? (expiresAt === null ? null : expiresAt - nowMs / 1000);
  const impact =
    served && left !== null
      ? `the current token is still served (expires in ${formatDuration(left)})`
      : 'consumers get 503 TOKEN_UNAVAILABLE';
  const cause = (summary: string, runbook: RunbookAnchor): Cause => ({
    code,
    summary: `${summary}; ${impact}`,
    runbook,
  });
  if (VENDOR_DOWN.has(code))
    return cause(`vendor unavailable: logins fail with ${code}`, RunbookSection.VendorUnavailable);
  switch (code) {
    case 'RATE_LIMIT_EXCEEDED':
      return cause(
        'the vendor rate-limited the login (429 RATE_LIMIT_EXCEEDED)',
        RunbookSection.VendorUnavailable,
      );
    case 'INVALID_CREDENTIALS':
      return cause(
        `the vendor rejected the username or password (INVALID_CREDENTIALS): put the right ones with "token-broker put-credentials ${set.id}"`,
        RunbookSection.CredentialsRejected,
      );
    case 'ENV_MISMATCH':
      return cause(
        `the vendor's token is for another environment than the set's "${set.environment}": its vendorBaseUrl or its secret belongs to the other environment`,
        RunbookSection.EnvMismatch,
      );
    case 'CREDENTIALS_UNAVAILABLE':
      return cause(
        'the secret could not be read (missing, or the refresher may not read it)',
        RunbookSection.NoUsableToken,
      );
    case 'CREDENTIALS_MALFORMED':
      return cause(
        `the secret is not {"username", "password"}: put it again with "token-broker put-credentials ${set.id}"`,
        RunbookSection.CredentialsRejected,
      );
    case 'CLOCK_SKEW_EXCESSIVE':
      return cause(
        "the vendor's clock (its Date header) is further from ours than the set accepts (maxClockSkewSeconds)",
        RunbookSection.NoUsableToken,
      );
    case 'TOKEN_LIFETIME_INVALID':
      return cause(
        "the vendor's token expires implausibly soon or late (clocks?)",
        RunbookSection.NoUsableToken,
      );
    default:
      return cause(`login failed with ${code}`, RunbookSection.NoUsableToken);
  }
}

/** Why a set is in its state, from its health as the broker reports it; "ok" when nothing is wrong. */
export function diagnose(set: SetHealthView, nowMs: number): Cause[] {
  const { health } = set;
  const causes: Cause[] = [];
  const code = health.lastError?.code;
  switch (health.state) {
    case 'HEALTHY':
      break;
    case 'REFRESHING':
      causes.push({
        code: null,
        summary: 're-login due or in progress; the current token is served',
        runbook: null,
      });
      break;
    case 'DEGRADED':
    case 'NO_USABLE_TOKEN':
    case 'CREDENTIALS_REJECTED':
    case 'ENV_MISMATCH': {
      const failed = code ?? IMPLIED_CODE[health.state];
      if (failed) causes.push(loginFailure(set, failed, health.state === 'DEGRADED', nowMs));
      else
        causes.push({
          code: null,
          summary: 'no token yet: the refresher has not logged in for this set (is it running?)',
          runbook: RunbookSection.RefresherNotRunning,
        });
      break;
    }
    default:
      causes.push({ code: null, summary: `state ${health.state} (unknown to this CLI)`, runbook: null });
  }
  const next = health.nextAttemptAt ? Date.parse(health.nextAttemptAt) : Number.NaN;
  const last = causes.at(-1);
  if (last && last.code !== null) {
    const failures = health.consecutiveFailures ?? 0;
    if (failures > 1) last.summary += `; ${failures} failed attempts in a row`;
    const rejections = health.rejectionsOfSecretVersion ?? 0;
    if (rejections > 1)
      last.summary += `; this secret version was rejected ${rejections} times, so the wait between attempts grows (a new version is tried at once)`;
    if (next > nowMs) last.summary += `; next login attempt in ${formatDuration((next - nowMs) / 1000)}`;
  }
  const limitedUntil = health.rateLimitedUntil ? Date.parse(health.rateLimitedUntil) : Number.NaN;
  if (limitedUntil > nowMs) {
    causes.push({
      code: 'RATE_LIMIT_EXCEEDED',
      summary: `rate limited by the vendor until ${isoSeconds(limitedUntil)}: consumers reported 429 RATE_LIMIT_EXCEEDED, no permits until then`,
      runbook: RunbookSection.VendorRateLimited,
    });
  }
  if (causes.length === 0) causes.push({ code: null, summary: 'ok', runbook: null });
  return causes;
}
