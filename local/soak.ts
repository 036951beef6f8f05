import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeJwt } from 'jose';
import { BrokerClient, PermitDeadlineError } from '../client/index.js';
import type { RateLimit } from '../shared/config/credential-sets.js';
import { slotMsFor } from '../shared/ledger/limit-plan.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { startLocalBroker } from './broker.js';
import { type LoadedLocalConfig, loadLocalConfig, withoutReservations } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';
import {
  type AskRecord,
  busiestSpan,
  type LimitMs,
  mostAllowed,
  percentile,
  quotaDenialsWithinReservation,
} from './soak-report.js';

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
  /** One consumer of the first set asks steadily, on its own principal, the others greedily (see ReservedSoak). */
  reserved?: ReservedSoak;
}

/**
 * The reserved-consumer scenario: consumer 0 is `consumer` (its own caller, principal and consumer name, added to
 * the soak's configuration), asking for one permit every `shortestWindow / perShortestWindow` seconds, steadily
 * (it asks for the next one only once the last was sent, as the reservations bench does); the other consumers are
 * greedy (priority `batch`). With `reservation`, the set holds it for the consumer (per general window, by its
 * windowSeconds); without, the same demand is served first come, first served.
 */
export interface ReservedSoak {
  consumer: string;
  perShortestWindow: number;
  reservation?: Record<string, number>;
}

/** The soak-only caller of the reserved consumer (SigV4 keys for the local Function URL only, like local/broker.config.json's). */
const RESERVED_CALLER = {
  accessKeyId: 'AKIASOAKRESERVED0001',
  secretAccessKey: 'local-only-soak-reserved-consumer-secret',
  principalArn: 'arn:aws:iam::000000000000:role/soak-reserved-consumer',
};

/**
 * A reservation sized for a steady rate, per general window W: the rate over W plus the margin (the ledger counts
 * each window over W + margin), rounded up, plus one for the slot a grant is counted in (the bench's sizing:
 * 20 a minute with a 3 s margin is ⌈20 × 63 / 60⌉ + 1 = 22).
 */
export function reservationFor(
  perShortestWindow: number,
  limits: readonly RateLimit[],
  marginSeconds: number,
): Record<string, number> {
  const shortest = Math.min(...limits.map((l) => l.windowSeconds));
  return Object.fromEntries(
    limits.map((l) => {
      const rate = (perShortestWindow * l.windowSeconds) / shortest;
      return [
        String(l.windowSeconds),
        Math.ceil((rate * (l.windowSeconds + marginSeconds)) / l.windowSeconds) + 1,
      ];
    }),
  );
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
  /** The same as numbers (requests the vendor accepted, at their answers' arrival in the client). */
  busiestCounts: number[];
  /** 429s the vendor sandbox itself counted (its RATE_LIMIT_EXCEEDED answers), for the set's environment. */
  sandbox429: number;
  /** Permits the broker granted on the set (every consumer), as its answers said (the reserved scenario only). */
  permitsGranted: number;
  /** The reserved-consumer scenario's figures (SoakSettings.reserved). */
  reserved?: ReservedFigures;
};

/** What the reserved consumer saw (real time, over HTTP + SigV4 through the local Function URL). */
export interface ReservedFigures {
  consumer: string;
  /** Its reservation per window (by windowSeconds); undefined: first come, first served. */
  reservation: Record<string, number> | undefined;
  /** Moments it wanted a permit within the run (its schedule's, whether it reached them or still waited). */
  wanted: number;
  /** Of those, how many had their permit (the vendor request on its way) before the run's end. */
  served: number;
  /** Per served one: from the moment it wanted the permit to the moment its request left with it, in ms. */
  waitsMs: number[];
  /** Permits the broker granted it. */
  permitsGranted: number;
  /** The broker's denials of its asks with reason QUOTA. */
  quotaDenials: number;
  /**
   * Of those, the ones asked while its own grants in every reserved window's span (window + margin + a slot,
   * widened by the ask's round trip) left room for the ask within its reservation: the ledger promises none.
   */
  quotaDenialsWithinReservation: number;
  /** Its other denials, by reason (a vendor cooldown, ...). */
  otherDenials: Record<string, number>;
}

export interface SoakResult {
  settings: SoakSettings;
  rows: SoakSetResult[];
  clientErrors: Record<string, number>;
  logLines: number;
  /** Occurrences of any access token or password in the broker's and the clients' logs. */
  secretsInLogs: number;
  elapsedSeconds: number;
  /** Every vendor answer to a consumer, by set, in ms since the consumers started: for the chart (soak-chart.ts). */
  vendorAnswers: SoakVendorAnswer[];
}

export interface SoakVendorAnswer {
  set: string;
  /** Which of the set's tokens it was sent with (0, 1, ...: the vendor counts per token), never the token. */
  token: number;
  atMs: number;
  status: number;
}

interface VendorHit {
  sentAt: number;
  at: number;
  status: number;
  token: string;
  /** The vendor's error code of a 401. */
  code?: string;
  /** Sent by the reserved consumer. */
  reserved?: boolean;
}

/** A permit ask and its answer, and whether the reserved consumer made it. */
type PermitAsk = AskRecord & { reserved: boolean; setId: string };

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The local configuration of a soak: the shipped one, narrowed to its sets, with its limits and refresh timing. */
export function soakConfig(settings: SoakSettings): LoadedLocalConfig {
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
      families: base.sandbox.families,
    },
    callers: settings.reserved
      ? [...base.callers, { name: settings.reserved.consumer, ...RESERVED_CALLER }]
      : base.callers,
    consumers: settings.reserved
      ? [
          ...base.consumers,
          {
            name: settings.reserved.consumer,
            principalArn: RESERVED_CALLER.principalArn,
            credentialSets: settings.setIds,
          },
        ]
      : base.consumers,
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
        // The shipped reservations are sized for the vendor's windows, not the soak's: only the scenario's.
        ...withoutReservations(set.rateLimits),
        general: settings.limits,
        marginSeconds: settings.marginSeconds,
        permitValiditySeconds: settings.permitValiditySeconds,
        ...(settings.reserved?.reservation
          ? {
              reservations: [
                { consumer: settings.reserved.consumer, perWindow: settings.reserved.reservation },
              ],
            }
          : {}),
      },
    })),
  };
}

/** The Authorization header of a fetch's init, whatever form its headers take. */
export function authorizationOf(init: RequestInit | undefined): string | undefined {
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
  const asks: PermitAsk[] = [];
  const recordPermitAsk = async (
    url: string,
    init: RequestInit | undefined,
    response: Response,
    sentAt: number,
    at: number,
    reserved: boolean,
  ) => {
    const body = (await response
      .clone()
      .json()
      .catch(() => ({}))) as { granted?: unknown; grantedAt?: unknown; details?: { reason?: unknown } };
    let asked: { count?: unknown } = {};
    try {
      asked = JSON.parse(typeof init?.body === 'string' ? init.body : '{}') as { count?: unknown };
    } catch {
      // Not the client's JSON ask: counted as an ask of 0.
    }
    const ask: PermitAsk = {
      sentAt,
      at,
      count: typeof asked.count === 'number' ? asked.count : 0,
      granted: response.status === 200 && typeof body.granted === 'number' ? body.granted : 0,
      reserved,
      setId: decodeURIComponent(new URL(url).pathname.split('/').at(-2) ?? ''),
    };
    if (response.status === 200 && typeof body.grantedAt === 'number') ask.grantedAt = body.grantedAt;
    if (response.status === 429 && typeof body.details?.reason === 'string') ask.reason = body.details.reason;
    asks.push(ask);
  };
  const recordingFetch =
    (reserved: boolean): typeof fetch =>
    async (input, init) => {
      const sentAt = Date.now();
      const response = await fetch(input, init);
      const at = Date.now();
      const url = String(input instanceof Request ? input.url : input);
      // Permit asks are recorded in the reserved scenario only: the windows soak's clients do as they did.
      if (
        settings.reserved !== undefined &&
        url.startsWith(broker.vendUrl) &&
        init?.method === 'POST' &&
        new URL(url).pathname.endsWith('/permits')
      ) {
        await recordPermitAsk(url, init, response, sentAt, at, reserved);
        return response;
      }
      const bearer = authorizationOf(init);
      if (!bearer || !vendorUrls.some((base) => url.startsWith(base))) return response;
      const hit: VendorHit = { sentAt, at, status: response.status, token: bearer.replace(/^Bearer /, '') };
      if (reserved) hit.reserved = true;
      if (response.status === 401) {
        const body = (await response
          .clone()
          .json()
          .catch(() => ({}))) as { code?: unknown };
        if (typeof body.code === 'string') hit.code = body.code;
      }
      hits.push(hit);
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
  const { reserved } = settings;
  const clients = Array.from({ length: settings.consumers }, (_, index) => {
    const isReserved = reserved !== undefined && index === 0;
    return new BrokerClient({
      brokerUrl: broker.vendUrl,
      region: config.region,
      credentials: isReserved
        ? { accessKeyId: RESERVED_CALLER.accessKeyId, secretAccessKey: RESERVED_CALLER.secretAccessKey }
        : { accessKeyId: caller.accessKeyId, secretAccessKey: caller.secretAccessKey },
      fetch: recordingFetch(isReserved),
      telemetry: clientTelemetry,
      validityFloorSeconds: settings.hardFloorSeconds,
      tokenMarginSeconds: 1,
      permitSafetyMs: 50,
      maxPermitWaitMs: settings.tokenLifetimeSeconds * 1000,
      // One permit per ask: each ask is one the reservation covers (or not), never a batch partly beyond it.
      ...(isReserved ? { maxBatchSize: 1 } : {}),
    });
  });

  const clientErrors: Record<string, number> = {};
  const started = Date.now();
  const deadline = started + settings.lifetimes * settings.tokenLifetimeSeconds * 1000;
  // The reserved consumer's wants (one every `every` ms) and, per want, the moment its request left with a permit.
  const wants: { dueAt: number; sentAt: number | undefined }[] = [];
  const every = reserved
    ? (Math.min(...settings.limits.map((l) => l.windowSeconds)) * 1000) / reserved.perShortestWindow
    : 0;
  const consumer = async (client: BrokerClient, index: number) => {
    const isReserved = reserved !== undefined && index === 0;
    const setId = settings.setIds[index % settings.setIds.length] ?? '';
    const key = `soak-${index}`;
    let created = false;
    // Its schedule starts with the run (the first request also creates its key and fetches the token).
    let due = started;
    while (Date.now() < deadline) {
      let want: (typeof wants)[number] | undefined;
      if (isReserved) {
        // Steady: it wants one every `every` ms, and asks for the next one once the last was sent.
        await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
        if (due >= deadline) break;
        want = { dueAt: due, sentAt: undefined };
        wants.push(want);
        due += every;
      }
      const sentBefore = hits.length;
      try {
        await client.vendorRequest(setId, {
          method: created ? 'GET' : 'POST',
          path: (token) => `/users/1/${token.tenant}/serviceKey/${key}`,
          ...(created ? {} : { body: { name: key } }),
          maxPermitWaitMs: Math.max(deadline - Date.now(), 1),
          ...(reserved && !isReserved ? { priority: 'batch' as const } : {}),
        });
        created = true;
      } catch (error) {
        if (error instanceof PermitDeadlineError) break;
        const { code, details } = error as { code?: string; details?: { field?: string } };
        const name = `${code ?? (error instanceof Error ? error.name : 'UNKNOWN')}${details?.field ? ` (${details.field})` : ''}`;
        if (code === 'DUPLICATE_KEY') created = true;
        else clientErrors[name] = (clientErrors[name] ?? 0) + 1;
      } finally {
        // Its first send since the want: the permit was in hand then (the client sends it with nothing awaited
        // in between). The recording pushes each send when its answer arrives, so look for the earliest.
        if (want) {
          const sends = hits.slice(sentBefore).filter((hit) => hit.reserved);
          want.sentAt = sends.length === 0 ? undefined : Math.min(...sends.map((hit) => hit.sentAt));
        }
      }
    }
  };
  const ticker = setInterval(() => {
    const elapsed = Math.round((Date.now() - started) / 1000);
    const total = Math.round((deadline - started) / 1000);
    progress?.(`${settings.windowKind}: ${elapsed} s of ${total} s, ${hits.length} vendor requests`);
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
  const vendorAnswers: SoakVendorAnswer[] = [];
  for (const set of broker.sets) {
    const sandbox = broker.sandboxes[set.environment];
    const username = credentials[set.secretId]?.username ?? '';
    const stats = sandbox?.stats();
    const setHits = hits.filter((hit) => decodeJwt(hit.token).username === username);
    const byToken = new Map<string, VendorHit[]>();
    for (const hit of setHits) byToken.set(hit.token, [...(byToken.get(hit.token) ?? []), hit]);
    const tokenNumber = new Map([...byToken.keys()].map((token, index) => [token, index]));
    for (const hit of setHits) {
      const token = tokenNumber.get(hit.token) ?? 0;
      vendorAnswers.push({ set: set.id, token, atMs: hit.at - started, status: hit.status });
    }
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
    const setAsks = asks.filter((ask) => ask.setId === set.id);
    const figures = (): ReservedFigures | undefined => {
      if (!reserved || set.id !== settings.setIds[0]) return undefined;
      const own = setAsks.filter((ask) => ask.reserved);
      const denials = own.filter((ask) => ask.granted === 0);
      const otherDenials: Record<string, number> = {};
      for (const ask of denials) {
        if (ask.reason === 'QUOTA') continue;
        const reason = ask.reason ?? 'UNKNOWN';
        otherDenials[reason] = (otherDenials[reason] ?? 0) + 1;
      }
      const served = wants.filter((want) => want.sentAt !== undefined && want.sentAt < deadline);
      return {
        consumer: reserved.consumer,
        reservation: reserved.reservation,
        // Every moment of its schedule in the run, reached or not (one still waiting for a permit has not
        // reached the next ones): what it wanted, as the reservations bench counts it.
        wanted: Math.max(wants.length, Math.ceil((deadline - started) / every)),
        served: served.length,
        waitsMs: served.map((want) => (want.sentAt ?? 0) - want.dueAt),
        permitsGranted: own.reduce((sum, ask) => sum + ask.granted, 0),
        quotaDenials: denials.filter((ask) => ask.reason === 'QUOTA').length,
        quotaDenialsWithinReservation: reserved.reservation
          ? quotaDenialsWithinReservation(own, reserved.reservation, settings.marginSeconds * 1000, slotMsFor)
          : 0,
        otherDenials,
      };
    };
    const reservedFigures = figures();
    const vendorErrors = stats?.errorsByCode ?? {};
    rows.push({
      mode: reserved
        ? `${reserved.reservation ? 'reserved' : 'first come, first served'} (${settings.windowKind})`
        : settings.windowKind,
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
      busiestCounts: busiest,
      sandbox429: vendorErrors.RATE_LIMIT_EXCEEDED ?? 0,
      permitsGranted: setAsks.reduce((sum, ask) => sum + ask.granted, 0),
      ...(reservedFigures ? { reserved: reservedFigures } : {}),
    });
  }
  await broker.close();

  const secrets = [
    ...new Set([...hits.map((hit) => hit.token), ...Object.values(credentials).map((c) => c.password)]),
  ];
  const haystack = `${logs.join('\n')}\n${clientTelemetry.dump()}`;
  const secretsInLogs = secrets.reduce((total, secret) => total + haystack.split(secret).length - 1, 0);
  return {
    settings,
    rows,
    clientErrors,
    logLines: logs.length,
    secretsInLogs,
    elapsedSeconds,
    vendorAnswers,
  };
}

/**
 * The reserved-consumer scenario of `npm run soak`: one set (prod-execution, the set that ships a reservation),
 * 20 consumers, one of them (`order-service`, soak-only) steady at 40 % of the short window's limit (20 per 10 s),
 * the other 19 greedy; sliding vendor windows (the strictest reading). Two token lifetimes (180 s of real time):
 * its 120 a minute stay well within the 300 a minute, and the 10 s window binds (the ledger counts it over
 * 10.25 s, the 60 s one over 60.25 s). The reservation holds its rate in both windows: in the 60 s one the
 * greedy consumers alone could fill the shared part otherwise, and a window it holds no reservation in is shared
 * like anyone's.
 */
export const RESERVED_SOAK_CONSUMER = 'order-service';
export const RESERVED_SOAK_RATE = 20;

export function reservedSoakSettings(
  base: Omit<SoakSettings, 'windowKind'>,
  withReservation: boolean,
): SoakSettings {
  return {
    ...base,
    windowKind: 'sliding',
    setIds: ['prod-execution'],
    reserved: {
      consumer: RESERVED_SOAK_CONSUMER,
      perShortestWindow: RESERVED_SOAK_RATE,
      ...(withReservation
        ? { reservation: reservationFor(RESERVED_SOAK_RATE, base.limits, base.marginSeconds) }
        : {}),
    },
  };
}

/** A row of the windows soak's table (the figures the soak has always printed). */
export function soakTableRow(row: SoakSetResult): Record<string, string | number> {
  const { busiestCounts: _b, sandbox429: _s, permitsGranted: _p, reserved: _r, ...printed } = row;
  return printed;
}

/** A row of the reserved-consumer table: its demand and waits (real seconds and a fraction of the short window). */
export function reservedTableRow(result: SoakResult): Record<string, string | number> {
  const row = result.rows.find((r) => r.reserved);
  const figures = row?.reserved;
  if (!row || !figures) throw new Error('not a reserved-consumer soak');
  const windowMs = Math.min(...result.settings.limits.map((l) => l.windowSeconds)) * 1000;
  const wait = (p: number) => {
    const ms = p === 100 ? Math.max(0, ...figures.waitsMs) : percentile(figures.waitsMs, p);
    return `${(ms / 1000).toFixed(3)} (${(ms / windowMs).toFixed(3)})`;
  };
  const reservation = figures.reservation
    ? Object.entries(figures.reservation)
        .map(([w, n]) => `${n}/${w}s`)
        .join(' ')
    : 'none';
  return {
    case: figures.reservation ? `reservation ${reservation}` : 'first come, first served',
    [`${figures.consumer} wanted`]: figures.wanted,
    served: `${((100 * figures.served) / Math.max(1, figures.wanted)).toFixed(1)} %`,
    'wait p50 s (/window)': wait(50),
    'wait p99 s (/window)': wait(99),
    'wait max s (/window)': wait(100),
    'permits granted (its)': `${row.permitsGranted} (${figures.permitsGranted})`,
    'vendor requests': row.vendorRequests,
    'vendor 429': row.vendor429,
    'vendor 401 (in transit)': `${row.vendor401} (${row.vendor401InTransit})`,
    'quota used': `${row.quotaUsedPct} %`,
    busiest: row.busiest,
    'its QUOTA denials (within reservation)': figures.reservation
      ? `${figures.quotaDenials} (${figures.quotaDenialsWithinReservation})`
      : `${figures.quotaDenials} (-)`,
    logins: row.logins,
  };
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
    else if (row.sandbox429 > 0) failures.push(`${where}: the vendor sandbox counted ${row.sandbox429} 429s`);
    if (row.reserved && row.reserved.quotaDenialsWithinReservation > 0)
      failures.push(
        `${where}: ${row.reserved.consumer} denied ${row.reserved.quotaDenialsWithinReservation} times for QUOTA within its reservation`,
      );
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
