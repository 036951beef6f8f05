import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { CredentialSetConfig } from '../config/credential-sets.js';
import {
  CredentialsMalformedError,
  type CredentialsRead,
  type CredentialsSource,
} from '../credentials/credentials-source.js';
import { BrokerError } from '../errors.js';
import { DIMENSION_CREDENTIAL_SET, DIMENSION_ERROR_CODE, Metric } from '../metric-names.js';
import { MetricUnit, type Telemetry } from '../observability.js';
import type { VendorLogin } from '../vendor-client/client.js';
import { VendorError } from '../vendor-client/errors.js';
import { TokenStoreUnavailableError } from './errors.js';
import { errorCodeOf, failureFor } from './failure-policy.js';
import { checkLoginResult } from './token-check.js';
import {
  type CredentialSetState,
  type FailureState,
  type StoredToken,
  storedTokenOf,
} from './token-state.js';
import type { TokenStore } from './token-store.js';
import type { DynamoClockEstimate } from './vendor-offset.js';

export type { VendorLogin };

export type AttemptResult =
  | { kind: 'LOGGED_IN'; token: StoredToken }
  | { kind: 'FAILED'; failure: FailureState }
  /** The storm guard, a backoff or a cooldown forbids an attempt before `until` (epoch ms). */
  | { kind: 'BLOCKED'; until: number; failure?: FailureState }
  /** Another process holds the lease (until `until`), or won the race for it: look again later. */
  | { kind: 'CONTENDED'; until?: number };

export interface AttemptContext {
  store: TokenStore;
  credentials: CredentialsSource;
  vendor: VendorLogin;
  clock: Clock;
  telemetry: Telemetry;
  holder: string;
  /** DynamoDB's clock against `clock` (RefresherOptions.dynamoClock); unset: `clock` is taken as DynamoDB's. */
  dynamoClock?: DynamoClockEstimate;
}

/**
 * One re-login of one set, safe with any number of processes doing the same: decide from the state just
 * read, take the lease in one conditional write (which fails if anyone attempted within the storm-guard
 * interval, if a backoff or cooldown runs, or if the current token changed since the read), log in, check the
 * token, then promote it or record the failure, both conditional on still holding the lease.
 */
export async function attemptRefresh(
  context: AttemptContext,
  set: CredentialSetConfig,
  state: CredentialSetState | undefined,
  signal?: AbortSignal,
): Promise<AttemptResult> {
  const { clock, store, telemetry } = context;
  const refresh = set.refresh;
  const now = clock.now();
  const dimensions = { [DIMENSION_CREDENTIAL_SET]: set.id };
  if (state?.lease) {
    telemetry.metric(Metric.LeaseContention, MetricUnit.Count, 1, dimensions);
    return { kind: 'CONTENDED', until: state.lease.expiresAt };
  }
  const failure = state?.failure;
  const interval = refresh.minAttemptIntervalSeconds * 1000;
  if (state?.lastAttemptAt !== undefined && state.lastAttemptAt > now - interval) {
    // Tell the later of the two: the storm guard's end, or the cooldown a failure set.
    return blocked(Math.max(state.lastAttemptAt + interval, failure?.cooldownUntil ?? 0), failure);
  }
  let secret: CredentialsRead | undefined;
  if (failure && failure.cooldownUntil > now) {
    if (failure.kind !== 'REJECTED') return blocked(failure.cooldownUntil, failure);
    // A rejected secret is read again on every run: a new version is worth an attempt at once.
    try {
      secret = await context.credentials.read(set.secretId);
    } catch (error) {
      telemetry.warn('secret unreadable during cooldown', {
        credentialSetId: set.id,
        errorCode: errorCodeOf(error),
      });
      return blocked(failure.cooldownUntil, failure);
    }
    if (secret.versionId === failure.secretVersion) return blocked(failure.cooldownUntil, failure);
    telemetry.info('secret version changed; trying at once', {
      credentialSetId: set.id,
      secretVersion: secret.versionId,
    });
  }

  const leaseId = randomUUID();
  const take = await store.takeLease({
    credentialSetId: set.id,
    holder: context.holder,
    leaseId,
    now,
    leaseExpiresAt: now + refresh.leaseSeconds * 1000,
    lastAttemptNoLaterThan: now - interval,
    expectedTokenId: state?.current?.tokenId ?? null,
    ...(state?.current === undefined && state?.expiredCurrentTokenId !== undefined
      ? { expiredTokenId: state.expiredCurrentTokenId }
      : {}),
    ...(secret ? { secretVersion: secret.versionId } : {}),
  });
  if (!take.taken) {
    telemetry.metric(Metric.LeaseContention, MetricUnit.Count, 1, dimensions);
    telemetry.debug('lease race lost', { credentialSetId: set.id });
    return { kind: 'CONTENDED' };
  }

  const held = take.state;
  try {
    secret ??= await context.credentials.read(set.secretId);
    const result = await context.vendor.login(secret.credentials, {
      signal: loginSignal(refresh.leaseSeconds, signal),
    });
    // The estimate as it stands after this attempt's own reads and lease write: what the ledger's time is, for
    // the token's vendor clock offset.
    const checked = checkLoginResult(result, set, clock.now(), context.dynamoClock?.offset());
    const previous = held.current ? storedTokenOf(held.current) : undefined;
    const promoted = await store.promote({
      credentialSetId: set.id,
      leaseId,
      now: clock.now(),
      token: checked.token,
      ...(previous ? { previous } : {}),
    });
    if (!promoted) {
      // Our lease expired and another process took it; its token wins and ours is dropped unseen.
      telemetry.warn('lease lost before promote; token discarded', {
        credentialSetId: set.id,
        tokenId: checked.token.tokenId,
      });
      return { kind: 'CONTENDED' };
    }
    telemetry.metric(Metric.LoginSuccess, MetricUnit.Count, 1, dimensions);
    if (checked.vendorClockSkewSeconds !== undefined) {
      telemetry.metric(
        Metric.VendorClockSkewSeconds,
        MetricUnit.Seconds,
        checked.vendorClockSkewSeconds,
        dimensions,
      );
    }
    if (!checked.envClaimed)
      telemetry.warn('token has no env claim; environment not verified', { credentialSetId: set.id });
    if (checked.vendorClockSkewSeconds === undefined)
      telemetry.warn('vendor answer had no Date header; its clock is taken as ours', {
        credentialSetId: set.id,
      });
    telemetry.info('login succeeded', {
      credentialSetId: set.id,
      tokenId: checked.token.tokenId,
      exp: checked.token.exp,
      previousTokenId: previous?.tokenId,
      requestId: result.requestId,
      vendorClockSkewSeconds: checked.vendorClockSkewSeconds,
      vendorOffsetMs: checked.token.vendorOffsetMs,
    });
    return { kind: 'LOGGED_IN', token: checked.token };
  } catch (error) {
    if (error instanceof TokenStoreUnavailableError) throw error;
    const secretVersion =
      secret?.versionId ?? (error instanceof CredentialsMalformedError ? error.versionId : undefined);
    const recorded = failureFor(error, {
      now: clock.now(),
      refresh,
      ...(held.failure ? { previous: held.failure } : {}),
      ...(secretVersion !== undefined ? { secretVersion } : {}),
    });
    reportFailure(telemetry, set.id, recorded, error);
    const kept = await store.recordFailure({
      credentialSetId: set.id,
      leaseId,
      now: clock.now(),
      failure: recorded,
    });
    if (!kept) telemetry.warn('lease lost before recording the failure', { credentialSetId: set.id });
    return { kind: 'FAILED', failure: recorded };
  }
}

const blocked = (until: number, failure: FailureState | undefined): AttemptResult =>
  failure ? { kind: 'BLOCKED', until, failure } : { kind: 'BLOCKED', until };

/** No login outlives its lease: past it, another process may already be logging in. */
function loginSignal(leaseSeconds: number, signal: AbortSignal | undefined): AbortSignal {
  const lease = AbortSignal.timeout(leaseSeconds * 1000);
  return signal ? AbortSignal.any([signal, lease]) : lease;
}

function reportFailure(telemetry: Telemetry, setId: string, failure: FailureState, error: unknown): void {
  const dimensions = { [DIMENSION_CREDENTIAL_SET]: setId };
  telemetry.metric(Metric.LoginFailure, MetricUnit.Count, 1, {
    ...dimensions,
    [DIMENSION_ERROR_CODE]: failure.errorCode,
  });
  if (failure.errorCode === 'INVALID_CREDENTIALS')
    telemetry.metric(Metric.CredentialsRejected, MetricUnit.Count, 1, dimensions);
  if (failure.errorCode === 'ENV_MISMATCH')
    telemetry.metric(Metric.EnvMismatch, MetricUnit.Count, 1, dimensions);
  if (error instanceof VendorError && failure.kind === 'TRANSIENT') {
    telemetry.metric(Metric.VendorUnavailable, MetricUnit.Count, 1, dimensions);
  }
  // The broker's own messages (vendor client's included) never hold a secret; anything else is named only.
  telemetry.warn('login failed', {
    credentialSetId: setId,
    errorCode: failure.errorCode,
    requestId: failure.requestId,
    kind: failure.kind,
    consecutiveFailures: failure.consecutive,
    rejectionsOfVersion: failure.rejectionsOfVersion,
    nextAttemptAt: new Date(failure.cooldownUntil).toISOString(),
    secretVersion: failure.secretVersion,
    reason: error instanceof BrokerError ? error.message : error instanceof Error ? error.name : undefined,
  });
}
