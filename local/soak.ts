import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeJwt } from 'jose';
import { BrokerClient, PermitDeadlineError } from '../client/index.js';
import type { RateLimit } from '../shared/config/credential-sets.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { startLocalBroker } from './broker.js';
import { type LoadedLocalConfig, loadLocalConfig } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';
import { busiestSpan, type LimitMs, mostAllowed } from './soak-report.js';

/**
 * The end-to-end soak: the local broker (dynalite, sandboxes, refresher, vend API over SigV4) with the vendor's
 * time compressed, and many consumers using the client library with more demand than the quota, for several
 * token lifetimes. The vendor sandbox is the judge: it counts every 429 and 401 it serves and every login.
 */
export interface SoakSettings {
  windowKind: 'fixed' | 'sliding';
  consumers: number;
  setIds: string[];
  tokenLifetimeSeconds: number;
  lifetimes: number;
  /** The vendor's limits per token, in the sandbox and in the ledger alike. */
  limits: RateLimit[];
  marginSeconds: number;
  permitValiditySeconds: number;
  softThresholdSeconds: number;
  softThresholdJitterSeconds: number;
  hardFloorSeconds: number;
  refreshIntervalSeconds: number;
}

/** `npm run soak`: tokens living 90 s, five lifetimes, 20 consumers on two sets (uat and prod). */
export const SOAK_DEFAULTS: Omit<SoakSettings, 'windowKind'> = {
  consumers: 20,
  setIds: ['uat-advisor', 'prod-advisor'],
  tokenLifetimeSeconds: 90,
  lifetimes: 5,
  // 50 a "minute" and 300 an "hour": both limits bind within one token's life. The windows are compressed
  // less than the lifetime because latency does not compress: the ledger's send margin (0.25 s, for loopback)
  // must stay a small part of the shortest window, as 3 s is of the vendor's real 60 s.
  limits: [
    { limit: 50, windowSeconds: 10 },
    { limit: 300, windowSeconds: 60 },
  ],
  marginSeconds: 0.25,
  permitValiditySeconds: 0.15,
  // Re-login 8-10 s before exp: a lead under 1/6 of the lifetime keeps five lifetimes to six logins.
  softThresholdSeconds: 8,
  softThresholdJitterSeconds: 2,
  hardFloorSeconds: 2,
  refreshIntervalSeconds: 1,
};

export type SoakSetResult = {
  mode: string;
  set: string;
  lifetimes: number;
  logins: number;
  tokens: number;
  vendorRequests: number;
  vendor429: number;
  vendor401: number;
  /**
   * Of the 401s, those the machine caused, not the broker: TOKEN_EXPIRED for a request sent with at least the
   * validity floor left, so it spent longer than the floor between the client's send and the vendor's check
   * (a process starved of CPU; client and vendor sandbox share one process here). Counted and shown, not a
   * failure; any other 401 is.
   */
  vendor401InTransit: number;
  /** The longest a vendor request took from the client's send to its answer, in ms (real time). */
  slowestVendorMs: number;
  otherVendorErrors: number;
  /** Accepted requests over the most the limits allow in each token's span of use (sliding reading). */
  quotaUsedPct: number;
  /** Per limit: the busiest span of the limit's length seen for any token, e.g. "50/6s". */
  busiest: string;
};

export interface SoakResult {
  settings: SoakSettings;
  rows: SoakSetResult[];
  clientErrors: Record<string, number>;
  logLines: number;
  /** Occurrences of any access token or password in the broker's and the clients' logs. */
  secretsInLogs: number;
  elapsedSeconds: number;
}

interface VendorHit {
  sentAt: number;
  at: number;
  status: number;
  token: string;
  /** The vendor's error code of a 401. */
  code?: string;
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function soakConfig(settings: SoakSettings): LoadedLocalConfig {
  const base = loadLocalConfig({}, repoRoot);
  const sets = base.credentialSets.filter((set) => settings.setIds.includes(set.id));
  if (sets.length !== settings.setIds.length)
    throw new Error(`unknown set among ${settings.setIds.join(', ')}`);
  return {
    ...base,
    port: 0,
    timeScale: 1,
    refreshIntervalSeconds: settings.refreshIntervalSeconds,
    sandbox: {
      tokenLifetimeSeconds: settings.tokenLifetimeSeconds,
      limits: settings.limits,
      windowKind: settings.windowKind,
      invalidatePreviousTokenOnLogin: false,
    },
    credentialSets: sets.map((set) => ({
      ...set,
      refresh: {
        ...set.refresh,
        softThresholdSeconds: settings.softThresholdSeconds,
        softThresholdJitterSeconds: settings.softThresholdJitterSeconds,
        hardFloorSeconds: settings.hardFloorSeconds,
        minAttemptIntervalSeconds: settings.refreshIntervalSeconds * 2,
        retryBackoffBaseSeconds: settings.refreshIntervalSeconds,
        retryBackoffMaxSeconds: settings.refreshIntervalSeconds * 2,
      },
      rateLimits: {
        ...set.rateLimits,
        general: settings.limits,
        marginSeconds: settings.marginSeconds,
        permitValiditySeconds: settings.permitValiditySeconds,
      },
    })),
  };
}

function authorizationOf(init: RequestInit | undefined): string | undefined {
  const headers = init?.headers;
  if (!headers) return undefined;
  if (headers instanceof Headers) return headers.get('authorization') ?? undefined;
  if (Array.isArray(headers)) return headers.find(([k]) => k.toLowerCase() === 'authorization')?.[1];
  const entry = Object.entries(headers).find(([k]) => k.toLowerCase() === 'authorization');
  return entry?.[1];
}

export async function runSoak(
  settings: SoakSettings,
  progress?: (line: string) => void,
): Promise<SoakResult> {
  const config = soakConfig(settings);
  const logs: string[] = [];
  const telemetry = new ConsoleTelemetry({ level: 'info', write: (line) => logs.push(line) });
  const brokerStarted = Date.now();
  const broker = await startLocalBroker(config, { telemetry });
  const vendorUrls = Object.values(broker.sandboxes).map((s) => s.url);
  const hits: VendorHit[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const sentAt = Date.now();
    const response = await fetch(input, init);
    const at = Date.now();
    const url = String(input instanceof Request ? input.url : input);
    const bearer = authorizationOf(init);
    if (bearer && vendorUrls.some((base) => url.startsWith(base))) {
      const hit: VendorHit = { sentAt, at, status: response.status, token: bearer.replace(/^Bearer /, '') };
      if (response.status === 401) {
        const body = (await response
          .clone()
          .json()
          .catch(() => ({}))) as { code?: unknown };
        if (typeof body.code === 'string') hit.code = body.code;
      }
      hits.push(hit);
    }
    return response;
  };
  const caller = config.callers.find((c) =>
    config.consumers.some(
      (k) =>
        k.principalArn === c.principalArn && settings.setIds.every((id) => k.credentialSets.includes(id)),
    ),
  );
  if (!caller) throw new Error('no local caller may use every soak set');
  const clientTelemetry = new MemoryTelemetry();
  const clients = Array.from(
    { length: settings.consumers },
    () =>
      new BrokerClient({
        brokerUrl: broker.vendUrl,
        region: config.region,
        credentials: { accessKeyId: caller.accessKeyId, secretAccessKey: caller.secretAccessKey },
        fetch: recordingFetch,
        telemetry: clientTelemetry,
        validityFloorSeconds: settings.hardFloorSeconds,
        tokenMarginSeconds: 1,
        permitSafetyMs: 50,
        maxPermitWaitMs: settings.tokenLifetimeSeconds * 1000,
      }),
  );

  const clientErrors: Record<string, number> = {};
  const started = Date.now();
  const deadline = started + settings.lifetimes * settings.tokenLifetimeSeconds * 1000;
  const consumer = async (client: BrokerClient, index: number) => {
    const setId = settings.setIds[index % settings.setIds.length] ?? '';
    const key = `soak-${index}`;
    let created = false;
    while (Date.now() < deadline) {
      try {
        await client.vendorRequest(setId, {
          method: created ? 'GET' : 'POST',
          path: (token) => `/users/1/${token.tenant}/serviceKey/${key}`,
          ...(created ? {} : { body: { name: key } }),
          maxPermitWaitMs: Math.max(deadline - Date.now(), 1),
        });
        created = true;
      } catch (error) {
        if (error instanceof PermitDeadlineError) break;
        const { code, details } = error as { code?: string; details?: { field?: string } };
        const name = `${code ?? (error instanceof Error ? error.name : 'UNKNOWN')}${details?.field ? ` (${details.field})` : ''}`;
        if (code === 'DUPLICATE_KEY') created = true;
        else clientErrors[name] = (clientErrors[name] ?? 0) + 1;
      }
    }
  };
  const ticker = setInterval(() => {
    const elapsed = Math.round((Date.now() - started) / 1000);
    progress?.(`${settings.windowKind}: ${elapsed}s, ${hits.length} vendor requests`);
  }, 15_000);
  try {
    await Promise.all(clients.map((client, index) => consumer(client, index)));
  } finally {
    clearInterval(ticker);
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  }
  // Consumers stop early when no permit can come before the deadline; the broker runs the full span.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())));
  const elapsedSeconds = (Date.now() - started) / 1000;

  const credentials = JSON.parse(readFileSync(config.credentialsPath, 'utf8')) as Record<
    string,
    { username: string; password: string }
  >;
  const limitsMs: LimitMs[] = settings.limits.map((l) => ({
    limit: l.limit,
    windowMs: l.windowSeconds * 1000,
  }));
  const rows: SoakSetResult[] = [];
  for (const set of broker.sets) {
    const sandbox = broker.sandboxes[set.environment];
    const username = credentials[set.secretId]?.username ?? '';
    const stats = sandbox?.stats();
    const setHits = hits.filter((hit) => decodeJwt(hit.token).username === username);
    const byToken = new Map<string, VendorHit[]>();
    for (const hit of setHits) byToken.set(hit.token, [...(byToken.get(hit.token) ?? []), hit]);
    let accepted = 0;
    let allowed = 0;
    const busiest = limitsMs.map(() => 0);
    for (const tokenHits of byToken.values()) {
      const times = tokenHits
        .filter((hit) => hit.status !== 429 && hit.status !== 401)
        .map((hit) => hit.at)
        .sort((a, b) => a - b);
      const first = times[0];
      const last = times.at(-1);
      if (first === undefined || last === undefined) continue;
      accepted += times.length;
      allowed += mostAllowed(limitsMs, first, last);
      limitsMs.forEach((limit, i) => {
        busiest[i] = Math.max(busiest[i] ?? 0, busiestSpan(times, limit.windowMs));
      });
    }
    const count = (status: number) => setHits.filter((hit) => hit.status === status).length;
    // The soak's vendor sandboxes keep the broker's clock (no offset): exp is comparable with Date.now().
    const floorMs = settings.hardFloorSeconds * 1000;
    const inTransit = setHits.filter(
      (hit) =>
        hit.status === 401 &&
        hit.code === 'TOKEN_EXPIRED' &&
        hit.sentAt <= (decodeJwt(hit.token).exp ?? 0) * 1000 - floorMs,
    ).length;
    rows.push({
      mode: settings.windowKind,
      set: set.id,
      // From the broker's start: its first login opens the first lifetime.
      lifetimes: Number(((Date.now() - brokerStarted) / 1000 / settings.tokenLifetimeSeconds).toFixed(2)),
      logins: stats?.logins[username]?.successes ?? 0,
      tokens: byToken.size,
      vendorRequests: setHits.length,
      vendor429: count(429),
      vendor401: count(401),
      vendor401InTransit: inTransit,
      slowestVendorMs: setHits.reduce((most, hit) => Math.max(most, hit.at - hit.sentAt), 0),
      otherVendorErrors: setHits.filter(
        (hit) => hit.status >= 400 && hit.status !== 429 && hit.status !== 401,
      ).length,
      quotaUsedPct: allowed === 0 ? 0 : Number(((100 * accepted) / allowed).toFixed(1)),
      busiest: settings.limits.map((l, i) => `${busiest[i]}/${l.windowSeconds}s`).join(' '),
    });
  }
  await broker.close();

  const secrets = [
    ...new Set([...hits.map((hit) => hit.token), ...Object.values(credentials).map((c) => c.password)]),
  ];
  const haystack = `${logs.join('\n')}\n${clientTelemetry.dump()}`;
  const secretsInLogs = secrets.reduce((total, secret) => total + haystack.split(secret).length - 1, 0);
  return { settings, rows, clientErrors, logLines: logs.length, secretsInLogs, elapsedSeconds };
}

/** The soak's promises; an empty list means it kept all of them. */
/**
 * What a soak must never show; with `minQuotaUsedPct`, also a quota use below it (a real-time figure that the
 * machine's load moves: `npm run soak` gates on it, `npm test` does not).
 */
export function soakFailures(result: SoakResult, minQuotaUsedPct?: number): string[] {
  const failures: string[] = [];
  for (const row of result.rows) {
    const where = `${row.mode} ${row.set}`;
    if (row.vendor429 > 0) failures.push(`${where}: ${row.vendor429} vendor 429s`);
    const broker401 = row.vendor401 - row.vendor401InTransit;
    if (broker401 > 0)
      failures.push(`${where}: ${broker401} vendor 401s (not explained by a request slower than the floor)`);
    if (row.logins > Math.floor(row.lifetimes) + 1) {
      failures.push(`${where}: ${row.logins} logins in ${row.lifetimes} lifetimes`);
    }
    if (minQuotaUsedPct !== undefined && row.quotaUsedPct < minQuotaUsedPct)
      failures.push(`${where}: quota used ${row.quotaUsedPct} %`);
  }
  if (result.secretsInLogs > 0) failures.push(`${result.secretsInLogs} secrets in the logs`);
  return failures;
}
