/**
 * The token-lifecycle scenarios of issue 13, as functions both the tests and `npm run bench` run: the vend API
 * and the refresher over real parts (dynalite through the real client, the vendor sandbox over HTTP), one
 * ManualClock for all. Each returns what it measured; the callers decide what must hold.
 */
import { ManualClock } from '../../shared/clock.js';
import type { CredentialSetInput } from '../../shared/config/credential-sets.js';
import { Metric } from '../../shared/metric-names.js';
import { tokenThresholds, validitySeconds } from '../../shared/tokens/index.js';
import type { VendResult } from '../../shared/vend/responses.js';
import type { VendEvent } from '../../shared/vend/vend-handler.js';
import type { LocalDynamo } from './dynalite.js';
import {
  fixture,
  getToken,
  parseBody,
  startVendHarness,
  type TokenBody,
  withChanges,
} from './vend-harness.js';

export const T0 = Date.UTC(2026, 0, 5, 0, 0, 0);
const SET = 'uat-advisor';

/** One vendor call with `accessToken`, as a consumer makes it: the status and the vendor's errorCode. */
export async function probeVendor(
  sandboxUrl: string,
  body: Pick<TokenBody, 'accessToken' | 'tenant'>,
): Promise<{ status: number; errorCode?: string }> {
  const response = await fetch(`${sandboxUrl}/users/1/${body.tenant}/serviceKey/probe-client`, {
    headers: { authorization: `Bearer ${body.accessToken}`, 'content-type': 'application/json' },
  });
  const text = await response.text();
  let errorCode: string | undefined;
  try {
    const json = JSON.parse(text) as { errorCode?: string; error?: { code?: string } };
    errorCode = json.errorCode ?? json.error?.code;
  } catch {
    errorCode = undefined;
  }
  return errorCode === undefined ? { status: response.status } : { status: response.status, errorCode };
}

// ---------------------------------------------------------------------------------------------------------
// 1. Vendor clock skew with a login outage

export interface SkewOutageResult {
  offsetSeconds: number;
  tokensVended: number;
  /** 503 answers: no usable token (the outage outlasted the old token's floor). */
  unavailable: number;
  /** Vended tokens the vendor answered 401 TOKEN_EXPIRED when called at once. */
  vendorSaidExpired: number;
  /** Any other 401 from the vendor for a vended token. */
  vendorOther401: number;
  /** Largest |expiresInSeconds − (exp − the vendor's clock)| over every answer, seconds. */
  maxExpiresInErrorSeconds: number;
  /** Smallest `exp − the vendor's clock` of a vended token, seconds: never below the hard floor. */
  minVendorValiditySeconds: number;
  /** Simulated seconds from the old token's first vend to its last. */
  oldTokenServedForSeconds: number;
}

/**
 * 4-hour tokens, the vendor's clock `offsetSeconds` off ours, a run every 5 minutes and a consumer asking for
 * the token every minute and calling the vendor with it at once. The vendor's login is down for an hour from
 * the first run that is due to re-login, so the old token runs into its floor and expiry during the outage.
 */
export async function skewOutageRun(dynamo: LocalDynamo, offsetSeconds: number): Promise<SkewOutageResult> {
  const clock = new ManualClock(T0);
  const h = await startVendHarness(dynamo, {
    clock,
    sandbox: { clockOffsetSeconds: offsetSeconds, tokenLifetimeSeconds: 4 * 3600 },
  });
  const result: SkewOutageResult = {
    offsetSeconds,
    tokensVended: 0,
    unavailable: 0,
    vendorSaidExpired: 0,
    vendorOther401: 0,
    maxExpiresInErrorSeconds: 0,
    minVendorValiditySeconds: Number.POSITIVE_INFINITY,
    oldTokenServedForSeconds: 0,
  };
  try {
    const set = h.sets[0];
    if (!set) throw new Error('no set');
    let outageEndsAt: number | undefined;
    let oldTokenId: string | undefined;
    let oldFirst = 0;
    let oldLast = 0;
    const end = T0 + 6 * 3600 * 1000;
    for (let t = T0; t <= end; t += 60_000) {
      clock.set(t);
      if ((t - T0) % 300_000 === 0) {
        if (outageEndsAt === undefined) {
          const current = (await h.tokenStore.read(SET, t))?.current;
          if (current && validitySeconds(current, t) <= tokenThresholds(set, current).softSeconds) {
            outageEndsAt = t + 3600_000;
            h.sandbox.update({ loginOutage: true });
          }
        } else if (t >= outageEndsAt) {
          h.sandbox.update({ loginOutage: false });
        }
        await h.refresher.runScheduled();
      }
      const answer = await getToken(h, '');
      if (answer.statusCode !== 200) {
        result.unavailable++;
        continue;
      }
      const body = parseBody<TokenBody>(answer);
      result.tokensVended++;
      oldTokenId ??= body.tokenId;
      if (body.tokenId === oldTokenId) {
        if (oldFirst === 0) oldFirst = t;
        oldLast = t;
      }
      const vendorNowSeconds = t / 1000 + offsetSeconds;
      const vendorLeft = body.expiresAt - vendorNowSeconds;
      result.maxExpiresInErrorSeconds = Math.max(
        result.maxExpiresInErrorSeconds,
        Math.abs(body.expiresInSeconds - vendorLeft),
      );
      result.minVendorValiditySeconds = Math.min(result.minVendorValiditySeconds, vendorLeft);
      const probe = await probeVendor(h.sandbox.url, body);
      if (probe.status === 401 && probe.errorCode === 'TOKEN_EXPIRED') result.vendorSaidExpired++;
      else if (probe.status === 401) result.vendorOther401++;
    }
    result.oldTokenServedForSeconds = (oldLast - oldFirst) / 1000;
    return result;
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// 2. Token lifetimes: logins per token and the share of each token's life in use

/** The thresholds before issue 13: the configured hour (plus jitter) and 300 s, whatever the lifetime. */
export const FIXED_THRESHOLDS = {
  softThresholdLifetimeFraction: 0.999,
  softThresholdLifetimeJitterFraction: 0,
  hardFloorLifetimeFraction: 0.998,
};

export interface LifetimeResult {
  lifetimeSeconds: number;
  periodSeconds: number;
  hours: number;
  /** Successful vendor logins for the set. */
  logins: number;
  /** Tokens that became current. */
  tokens: number;
  /**
   * Logins made during each token's life (from its login to its `exp`), its replacement included; the mean
   * over the tokens whose life ended inside the run. 1.00: one login per token; the fixed 60-minute threshold
   * made one at every run for tokens shorter than it.
   */
  loginsPerToken: number;
  /** Per replaced token, (next login − its login) / its lifetime. */
  minShareInUse: number;
  meanShareInUse: number;
  /** Token requests answered 503 (no usable token), and tokens vended below their floor (never). */
  consumerRefusals: number;
  vendedBelowFloor: number;
  /** Scheduled runs that logged the set in, of all runs. */
  runsThatLoggedIn: number;
  runs: number;
  /** With an outage: its length and when it started, seconds before the old token's exp (vendor clock). */
  outageMinutes: number;
  outageStartedWithLeftSeconds?: number;
}

/**
 * One set whose tokens live `lifetimeSeconds`, a scheduled run every `periodSeconds`, and a consumer asking for
 * the token every `stepSeconds` (its on-demand re-logins count too), for `hours` simulated hours. With
 * `outageMinutes`, the vendor's login is down that long from the first step the token is inside its soft
 * threshold. `refresh` overrides the set's refresh settings (the bench uses it to show yesterday's fixed one).
 */
export async function lifetimeRun(
  dynamo: LocalDynamo,
  options: {
    lifetimeSeconds: number;
    periodSeconds: number;
    hours: number;
    outageMinutes?: number;
    refresh?: CredentialSetInput['refresh'];
    /** How often the consumer asks (default 60 s; the period must be a multiple of it). */
    stepSeconds?: number;
  },
): Promise<LifetimeResult> {
  const stepMs = (options.stepSeconds ?? 60) * 1000;
  const clock = new ManualClock(T0);
  const h = await startVendHarness(dynamo, {
    clock,
    sandbox: { tokenLifetimeSeconds: options.lifetimeSeconds },
    ...(options.refresh ? { setOverrides: { refresh: options.refresh } } : {}),
  });
  try {
    const set = h.sets[0];
    if (!set) throw new Error('no set');
    const logins: { tokenId: string; at: number; lifetime: number }[] = [];
    let refusals = 0;
    let belowFloor = 0;
    let runs = 0;
    let runsThatLoggedIn = 0;
    let outageEndsAt: number | undefined;
    let outageStartedWithLeftSeconds: number | undefined;
    const end = T0 + options.hours * 3600 * 1000;
    const note = async (t: number) => {
      const current = (await h.tokenStore.read(SET, t))?.current;
      if (current && current.tokenId !== logins.at(-1)?.tokenId) {
        logins.push({
          tokenId: current.tokenId,
          at: current.obtainedAt,
          lifetime: tokenThresholds(set, current).lifetimeSeconds,
        });
      }
      return current;
    };
    for (let t = T0; t < end; t += stepMs) {
      clock.set(t);
      if (options.outageMinutes !== undefined) {
        const current = (await h.tokenStore.read(SET, t))?.current;
        if (
          outageEndsAt === undefined &&
          current &&
          validitySeconds(current, t) <= tokenThresholds(set, current).softSeconds
        ) {
          outageEndsAt = t + options.outageMinutes * 60_000;
          outageStartedWithLeftSeconds = validitySeconds(current, t);
          h.sandbox.update({ loginOutage: true });
        } else if (outageEndsAt !== undefined && t >= outageEndsAt) {
          h.sandbox.update({ loginOutage: false });
        }
      }
      if ((t - T0) % (options.periodSeconds * 1000) === 0) {
        runs++;
        const summary = await h.refresher.runScheduled();
        if (summary.sets.find((s) => s.credentialSetId === SET)?.action === 'LOGGED_IN') runsThatLoggedIn++;
      }
      await note(t);
      const answer = await getToken(h, '');
      if (answer.statusCode !== 200) refusals++;
      else {
        const body = parseBody<TokenBody>(answer);
        const state = await h.tokenStore.read(SET, t);
        const served = [state?.current, state?.previous].find((tk) => tk?.tokenId === body.tokenId);
        if (served && validitySeconds(served, t) < tokenThresholds(set, served).hardFloorSeconds)
          belowFloor++;
      }
      await note(t);
    }
    const shares = logins
      .slice(0, -1)
      .map((login, i) => ((logins[i + 1]?.at ?? 0) - login.at) / 1000 / login.lifetime);
    const loginCount = h.telemetry.sum(Metric.LoginSuccess, { CredentialSet: SET });
    const ended = logins.filter((login) => login.at + login.lifetime * 1000 <= end);
    const perTokenLife = ended.map(
      (login) =>
        logins.filter((other) => other.at > login.at && other.at < login.at + login.lifetime * 1000).length,
    );
    const result: LifetimeResult = {
      lifetimeSeconds: options.lifetimeSeconds,
      periodSeconds: options.periodSeconds,
      hours: options.hours,
      logins: loginCount,
      tokens: logins.length,
      loginsPerToken:
        perTokenLife.length === 0 ? 0 : perTokenLife.reduce((a, b) => a + b, 0) / perTokenLife.length,
      minShareInUse: shares.length === 0 ? 0 : Math.min(...shares),
      meanShareInUse: shares.length === 0 ? 0 : shares.reduce((a, b) => a + b, 0) / shares.length,
      consumerRefusals: refusals,
      vendedBelowFloor: belowFloor,
      runsThatLoggedIn,
      runs,
      outageMinutes: options.outageMinutes ?? 0,
    };
    if (outageStartedWithLeftSeconds !== undefined)
      result.outageStartedWithLeftSeconds = outageStartedWithLeftSeconds;
    return result;
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// 3. A wrong password for a day

export interface WrongPasswordResult {
  hours: number;
  /** Login requests the vendor saw with the wrong password. */
  vendorLoginAttempts: number;
  /** Seconds between the attempts. */
  gapsSeconds: number[];
  /** Token requests during the day (each was answered 503). */
  tokenRequests: number;
  /** After the day: a new secret version is stored; did the next scheduled run log in? */
  newVersionLoggedInOnNextRun: boolean;
}

/** A run every 5 minutes and a consumer every minute, the set's secret holding a wrong password. */
export async function wrongPasswordRun(dynamo: LocalDynamo, hours = 24): Promise<WrongPasswordResult> {
  const clock = new ManualClock(T0);
  const h = await startVendHarness(dynamo, { clock, setOverrides: { secretId: 'broker/uat-advisor-only' } });
  try {
    h.credentials.set('broker/uat-advisor-only', { username: 'uat-advisor', password: 'wrong-pw-1' }, 'v1');
    const failures = () => h.sandbox.stats().logins['uat-advisor']?.failures ?? 0;
    const attempts: number[] = [];
    let tokenRequests = 0;
    const end = T0 + hours * 3600 * 1000;
    for (let t = T0; t < end; t += 60_000) {
      clock.set(t);
      const before = failures();
      if ((t - T0) % 300_000 === 0) await h.refresher.runScheduled();
      await getToken(h, '');
      tokenRequests++;
      if (failures() > before) attempts.push(t);
    }
    clock.set(end);
    h.credentials.set(
      'broker/uat-advisor-only',
      { username: 'uat-advisor', password: 'uat-advisor-sandbox-pw' },
      'v2',
    );
    const run = await h.refresher.runScheduled();
    return {
      hours,
      vendorLoginAttempts: failures(),
      gapsSeconds: attempts.slice(1).map((at, i) => (at - (attempts[i] ?? at)) / 1000),
      tokenRequests,
      newVersionLoggedInOnNextRun: run.sets.find((s) => s.credentialSetId === SET)?.action === 'LOGGED_IN',
    };
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// 4. Quota scope across a re-login

export interface QuotaScopeResult {
  quotaScope: 'token' | 'user';
  vendorCounts: 'token' | 'user';
  /** Requests the vendor accepted, and its 429s. */
  vendorAccepted: number;
  vendor429: number;
  /** Requests sent per simulated minute (accepted or not). */
  sentPerMinute: number;
  seconds: number;
}

const permitEvent = (tokenId: string): VendEvent =>
  withChanges(fixture('acquire-permits'), { body: { tokenId, count: 1 } });

/**
 * Saturating demand across a re-login: a rejection report replaces the current token, after which two
 * consumers keep sending with the previous token (still valid at the vendor) and two with the new one, each
 * asking a permit for every call, for `seconds` simulated seconds. The vendor counts per token or per user.
 */
export async function quotaScopeRun(
  dynamo: LocalDynamo,
  quotaScope: 'token' | 'user',
  vendorCounts: 'token' | 'user',
  seconds = 180,
): Promise<QuotaScopeResult> {
  const clock = new ManualClock(T0);
  const h = await startVendHarness(dynamo, {
    clock,
    sandbox: { rateLimitScope: vendorCounts },
    setOverrides: { quotaScope },
  });
  try {
    const first = parseBody<TokenBody>(await getToken(h, ''));
    await clock.advance(120_000); // past the storm guard
    const rejection = withChanges(fixture('report-token-rejection'), {
      body: { tokenId: first.tokenId, errorCode: 'TOKEN_INVALID' },
    });
    const second = parseBody<TokenBody>(await h.invoke(rejection));
    if (second.tokenId === first.tokenId) throw new Error('expected a re-login');
    const consumers = [first, first, second, second];
    let accepted = 0;
    let limited = 0;
    let sent = 0;
    const start = clock.now();
    // Every consumer tries every 250 ms: far more than the 50 a minute either token may send.
    while (clock.now() - start < seconds * 1000) {
      for (const token of consumers) {
        const grant = await h.invoke(permitEvent(token.tokenId));
        if (grant.statusCode !== 200) continue;
        sent++;
        const probe = await probeVendor(h.sandbox.url, token);
        if (probe.status === 429) limited++;
        else accepted++;
      }
      await clock.advance(250);
    }
    return {
      quotaScope,
      vendorCounts,
      vendorAccepted: accepted,
      vendor429: limited,
      sentPerMinute: Number(((sent / seconds) * 60).toFixed(1)),
      seconds,
    };
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// 5. A rejection-driven re-login seen by every vend instance

export interface PropagationResult {
  instances: number;
  versionCheckMs: number;
  /** Simulated ms after the report at which the last instance still served the rejected token (0: none did). */
  lastStaleServeMs: number;
  /** Vend answers of the rejected token after the report, over all instances. */
  staleAnswers: number;
  /** Tokens-table reads per instance per simulated second in the warm minute before the report. */
  fullReadsPerInstanceSecond: number;
  versionReadsPerInstanceSecond: number;
}

/**
 * `instances` vend instances (each its own warm cache) serve a consumer's token request every 100 ms each; one
 * consumer reports the current token rejected to the first; the re-login happens there. How long do the others
 * keep serving the rejected token? Reads are counted over the warm minute before the report.
 */
export async function propagationRun(
  dynamo: LocalDynamo,
  options: { instances: number; versionCheckMs: number; stepMs?: number; afterMs?: number },
): Promise<PropagationResult> {
  const clock = new ManualClock(T0);
  const h = await startVendHarness(dynamo, { clock, vend: { versionCheckMs: options.versionCheckMs } });
  try {
    const stepMs = options.stepMs ?? 100;
    const afterMs = options.afterMs ?? 3000;
    const instances: { invoke(event: VendEvent): Promise<VendResult> }[] = [
      { invoke: h.invoke },
      ...Array.from({ length: options.instances - 1 }, () => h.newContainer()),
    ];
    const tokenRequest = withChanges(fixture('get-token'), { query: '' });
    const ask = () => Promise.all(instances.map((i) => i.invoke(tokenRequest)));
    // The first instance logs in; the others then find the token in the table (a cold start of all at once
    // would have them wait for the login on the clock, which only this loop moves).
    const first = parseBody<TokenBody>(await h.invoke(tokenRequest));
    await ask();
    await clock.advance(61_000);
    // A warm minute: every instance answers from memory, confirming its version as configured. It ends a
    // second after a full read (the 30 s TTL), so the report finds every cache as fresh as it gets.
    const reads = h.store.reads;
    const versionReads = h.store.versionReads;
    const warmMs = 61_000;
    for (let ms = 0; ms < warmMs; ms += 500) {
      await ask();
      await clock.advance(500);
    }
    const fullReads = (h.store.reads - reads) / options.instances / (warmMs / 1000);
    const versionChecks = (h.store.versionReads - versionReads) / options.instances / (warmMs / 1000);
    const report = withChanges(fixture('report-token-rejection'), {
      body: { tokenId: first.tokenId, errorCode: 'TOKEN_INVALID' },
    });
    // The worst moment for the report: every instance has just confirmed its version (or read).
    await clock.advance(500);
    await ask();
    const answered = parseBody<TokenBody>(await h.invoke(report));
    if (answered.tokenId === first.tokenId) throw new Error('expected a re-login');
    const reportedAt = clock.now();
    let lastStale = 0;
    let stale = 0;
    while (clock.now() - reportedAt <= afterMs) {
      for (const answer of await ask()) {
        if (answer.statusCode === 200 && parseBody<TokenBody>(answer).tokenId === first.tokenId) {
          stale++;
          lastStale = Math.max(lastStale, clock.now() - reportedAt);
        }
      }
      await clock.advance(stepMs);
    }
    return {
      instances: options.instances,
      versionCheckMs: options.versionCheckMs,
      lastStaleServeMs: lastStale,
      staleAnswers: stale,
      fullReadsPerInstanceSecond: Number(fullReads.toFixed(3)),
      versionReadsPerInstanceSecond: Number(versionChecks.toFixed(3)),
    };
  } finally {
    await h.close();
  }
}
