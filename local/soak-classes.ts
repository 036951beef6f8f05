import { readFileSync } from 'node:fs';
import { BrokerClient, PermitDeadlineError } from '../client/index.js';
import type { SandboxFamily } from '../sandbox/index.js';
import type { RateLimit } from '../shared/config/credential-sets.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { startLocalBroker } from './broker.js';
import type { LoadedLocalConfig } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';
import {
  type LearnedClassFigures,
  type OperatorAccess,
  operatorStatus,
  watchLearnedClasses,
} from './learned-watch.js';
import { authorizationOf, SOAK_DEFAULTS, type SoakSettings, soakConfig } from './soak.js';
import {
  busiestSpans,
  type LimitMs,
  mostAllowed,
  type SpanFigure,
  spanExcesses,
  type VendorLogEntry,
} from './soak-report.js';

/**
 * The classes soak (issue 24, "Show"): the local broker, a vendor sandbox with endpoint families whose limits are
 * lower than the general ones, and consumers sending general, report and rebalancing requests through the
 * client's vendor request API, in REAL time over HTTP + SigV4 through the local Function URL.
 *
 * - `learned`: the set's classes are configured with paths only (`{ "paths": ["/reports/**"] }`, contract point
 *   1): the broker was not told the limits and learns them from the vendor's answers; requests name no class (the
 *   client classifies them by path).
 * - `configured`: the same paths with the sandbox's limits (`{ "paths": [...], "limits": [...] }`): no learning.
 *
 * The vendor sandbox is the judge: its log of rate-limited outcomes (served and refused, with the limit that
 * refused) gives the 429s per class and the busiest span of every window.
 */
export type ClassesVariant = 'learned' | 'configured';

export interface ClassesSoakSettings extends Omit<SoakSettings, 'setIds' | 'reserved' | 'lifetimes'> {
  variant: ClassesVariant;
  setId: string;
  /** The vendor's endpoint families: their limits are the sandbox's (hidden from the broker when learned). */
  families: SandboxFamily[];
  /** Real seconds of demand. */
  durationSeconds: number;
  /**
   * The general lanes' requests per second in all, paced; undefined: greedy. Paced below the general limits, the
   * class limits are the binding ones (greedy general lanes keep the general limit full, and a class request
   * needs general room too, so a class could not be measured against its own limits).
   */
  generalPerSecond?: number;
}

/** One row of the table: the general limits, or one class. */
export interface ClassRow {
  variant: ClassesVariant;
  /** `general` or the class (family) name. */
  quota: string;
  /** The vendor's limits of this quota (the sandbox's settings). */
  limits: RateLimit[];
  /** Whether the broker was told these limits (general: always). */
  told: boolean;
  /** Vendor requests of the class (general: every request, the general limits count them all). */
  requests: number;
  /** Served by the vendor (its log). */
  served: number;
  /** Vendor 429s this quota's limits caused, on requests sent before the class's first answer arrived. */
  vendor429Learning: number;
  /** The same, sent after it (general: every one). */
  vendor429After: number;
  /**
   * Of those, the ones a limit refused that no answer of the class had named (X-RateLimit-Limit) before the
   * request was sent: the vendor names only the tightest window, so a class's second limit shows itself when it
   * is nearly full, and a request already in flight may meet it (docs/class-limits.md, "A limit not yet named").
   */
  vendor429AfterUnnamed: number;
  /** The most 429s after learning by one such limit not yet named (the promise: at most one each). */
  vendor429PerUnnamedLimit: number;
  /** Served after learning over the most the limits allow in each quota key's span of use after learning. */
  quotaUsedPct: number;
  /** Busiest span per limit, from the vendor's log: e.g. "10/10s". */
  busiest: SpanFigure[];
  /**
   * From the class's first request to the moment the broker learned its first limit (the learnedAt the
   * operator's view showed first), in ms (learned classes); the first answer's time where the view showed none.
   */
  learnMs: number | undefined;
  /** Learned classes: polls (every second) that found the class back at the probe after it had learned. */
  probeFallbacks?: number;
  /** Learned classes: what the broker showed as learned at the end, e.g. "10/10s + 30/60s". */
  learnedAtEnd?: string;
}

export interface ClassesSoakResult {
  settings: ClassesSoakSettings;
  rows: ClassRow[];
  /** spanExcesses of the vendor's log: every span above a limit. */
  excesses: string[];
  clientErrors: Record<string, number>;
  vendor401: number;
  secretsInLogs: number;
  elapsedSeconds: number;
  /** Learned variant: `token-broker status <set>` as the operator ran it two thirds into the run. */
  status?: string;
}

interface VendorHit {
  sentAt: number;
  at: number;
  status: number;
  token: string;
  requestId: string | undefined;
  /** The family whose prefix the path has (the soak's own knowledge), undefined for a general request. */
  family: string | undefined;
  /** The answer's X-RateLimit-Limit: the limit it named. */
  named: number | undefined;
}

/**
 * `npm run soak -- classes`: 20 consumers on uat-advisor for 300 s each case, tokens living 90 s (so the second
 * token must keep what the first one learned), sliding vendor windows (the strictest reading). General limits as
 * the windows soak (50/10 s + 300/60 s, "minute" and "hour" compressed); the families 5-12 times lower, each
 * window binding in turn: reports 10/10 s + 30/60 s, rebalancing 4/10 s + 12/60 s.
 */
export const CLASSES_SOAK_DEFAULTS: Omit<ClassesSoakSettings, 'variant'> = {
  ...SOAK_DEFAULTS,
  windowKind: 'sliding',
  setId: 'uat-advisor',
  // 300 s: a run ends mid-window and a token change restarts the vendor's count; over 150 s those edges moved
  // the quota used by +-8 points from run to run, over 300 s they weigh half as much.
  durationSeconds: 300,
  // Compressed 10 s windows with real HTTP round trips (p99 0.3-0.5 s on 2 busy cores): a 0.15 s permit lapsed
  // before it was sent for about one grant in ten (docs/classes-soak-quota.md); 0.4 s inside a 0.5 s margin.
  marginSeconds: 0.5,
  permitValiditySeconds: 0.4,
  // 3 a second in all: 60 % of the general limits, so the classes' own limits bind (the general limits bind in
  // `npm run soak -- windows`).
  generalPerSecond: 3,
  families: [
    {
      name: 'reports',
      pathPrefix: '/reports/',
      limits: [
        { limit: 10, windowSeconds: 10 },
        { limit: 30, windowSeconds: 60 },
      ],
    },
    {
      name: 'rebalancing',
      pathPrefix: '/rebalancing/',
      limits: [
        { limit: 4, windowSeconds: 10 },
        { limit: 12, windowSeconds: 60 },
      ],
    },
  ],
};

/**
 * The set's classes as the variant configures them: each by its family's paths, with the sandbox's limits
 * (configured) or none (learned from the vendor's answers). Typed loosely: the object form is an input of the
 * schema, checked where the configuration is parsed.
 */
function classesOf(settings: ClassesSoakSettings): Record<string, unknown> {
  return Object.fromEntries(
    settings.families.map((family) => [
      family.name,
      {
        paths: [`${family.pathPrefix}**`],
        ...(settings.variant === 'configured' ? { limits: family.limits } : {}),
      },
    ]),
  );
}

function classesConfig(settings: ClassesSoakSettings): LoadedLocalConfig {
  const config = soakConfig({ ...settings, setIds: [settings.setId], lifetimes: 1 });
  return {
    ...config,
    credentialSets: config.credentialSets.map((set) => {
      // The classes' paths are given in `classes` itself: the parsed `classPaths` of the base set would repeat them.
      const { classPaths: _paths, ...limits } = set.rateLimits;
      // An input of the schema (the object form), parsed again where the local broker reads its sets.
      const rateLimits = { ...limits, classes: classesOf(settings) } as unknown as typeof set.rateLimits;
      return { ...set, rateLimits };
    }),
  };
}

const familyOfPath = (families: readonly SandboxFamily[], path: string): string | undefined =>
  families.find((family) => path.startsWith(family.pathPrefix))?.name;

export async function runClassesSoak(
  settings: ClassesSoakSettings,
  progress?: (line: string) => void,
): Promise<ClassesSoakResult> {
  const config = classesConfig(settings);
  const logs: string[] = [];
  const telemetry = new ConsoleTelemetry({ level: 'info', write: (line) => logs.push(line) });
  const broker = await startLocalBroker(config, {
    telemetry,
    sandbox: { families: settings.families, recordRequests: true },
  });
  const sandbox = Object.values(broker.sandboxes)[0];
  if (!sandbox) {
    await broker.close();
    throw new Error('the classes soak needs a local vendor sandbox');
  }
  const hits: VendorHit[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const sentAt = Date.now();
    const response = await fetch(input, init);
    const url = String(input instanceof Request ? input.url : input);
    const bearer = authorizationOf(init);
    if (bearer && url.startsWith(sandbox.url)) {
      hits.push({
        sentAt,
        at: Date.now(),
        status: response.status,
        token: bearer.replace(/^Bearer /, ''),
        requestId: response.headers.get('x-request-id') ?? undefined,
        family: familyOfPath(settings.families, new URL(url).pathname),
        named: Number(response.headers.get('x-ratelimit-limit')) || undefined,
      });
    }
    return response;
  };
  // The consumers are spread over every local caller that may use the set (two services on uat-advisor): what
  // one service's processes report of a learned class, another's corroborates (docs/class-limits.md, "Trust").
  const callers = config.callers.filter((c) =>
    config.consumers.some(
      (k) => k.principalArn === c.principalArn && k.credentialSets.includes(settings.setId),
    ),
  );
  if (callers.length === 0) throw new Error(`no local caller may use ${settings.setId}`);
  const clientTelemetry = new MemoryTelemetry();
  const clients = Array.from({ length: settings.consumers }, (_, index) => {
    // Each service has consumers of every class: 0 and 1 the first's reports and rebalancing, 2 and 3 the second's.
    const families = Math.max(1, settings.families.length);
    const caller = callers[Math.floor(index / families) % callers.length] as (typeof callers)[number];
    return new BrokerClient({
      brokerUrl: broker.vendUrl,
      region: config.region,
      credentials: { accessKeyId: caller.accessKeyId, secretAccessKey: caller.secretAccessKey },
      fetch: recordingFetch,
      telemetry: clientTelemetry,
      validityFloorSeconds: settings.hardFloorSeconds,
      tokenMarginSeconds: 1,
      permitSafetyMs: 50,
      maxPermitWaitMs: settings.durationSeconds * 1000,
    });
  });

  // The operator's view while it runs (learned): what the broker learned and when, and the CLI's status.
  const operator = config.callers.find((c) =>
    config.operators.some((o) => o.principalArn === c.principalArn),
  );
  const access: OperatorAccess | undefined = operator && {
    vendUrl: broker.vendUrl,
    region: config.region,
    accessKeyId: operator.accessKeyId,
    secretAccessKey: operator.secretAccessKey,
  };
  const watch =
    settings.variant === 'learned' && access ? watchLearnedClasses(access, settings.setId) : undefined;
  let status: Promise<string> | undefined;
  const statusTimer =
    watch && access
      ? setTimeout(
          () => {
            status = operatorStatus(access, settings.setId);
          },
          (settings.durationSeconds * 2000) / 3,
        )
      : undefined;

  const clientErrors: Record<string, number> = {};
  const started = Date.now();
  const deadline = started + settings.durationSeconds * 1000;
  /** One greedy stream of requests of one kind; a consumer runs a general lane and one family's lane at once. */
  const lane = async (client: BrokerClient, index: number, family: SandboxFamily | undefined) => {
    const key = `classes-${index}`;
    let created = family !== undefined;
    // A paced general lane: each consumer's share of generalPerSecond, its first request at a spread offset.
    const pace =
      family === undefined && settings.generalPerSecond !== undefined
        ? (settings.consumers / settings.generalPerSecond) * 1000
        : undefined;
    let nextAt = started + (pace === undefined ? 0 : (pace * index) / settings.consumers);
    for (let n = 0; Date.now() < deadline; n++) {
      if (pace !== undefined) {
        const wait = nextAt - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        nextAt += pace;
        if (Date.now() >= deadline) break;
      }
      try {
        await client.vendorRequest(settings.setId, {
          method: created ? 'GET' : 'POST',
          path: (token) =>
            family ? `${family.pathPrefix}c${index}/r-${n}` : `/users/1/${token.tenant}/serviceKey/${key}`,
          ...(created ? {} : { body: { name: key } }),
          maxPermitWaitMs: Math.max(deadline - Date.now(), 1),
        });
        created = true;
      } catch (error) {
        if (error instanceof PermitDeadlineError) break;
        const { code } = error as { code?: string };
        if (code === 'DUPLICATE_KEY') created = true;
        else {
          const name = code ?? (error instanceof Error ? error.name : 'UNKNOWN');
          clientErrors[name] = (clientErrors[name] ?? 0) + 1;
          // No hot loop on a failing broker.
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    }
  };
  const ticker = setInterval(() => {
    const elapsed = Math.round((Date.now() - started) / 1000);
    progress?.(`classes (${settings.variant}): ${elapsed}s, ${hits.length} vendor requests`);
  }, 15_000);
  try {
    await Promise.all(
      clients.flatMap((client, index) => [
        lane(client, index, undefined),
        lane(client, index, settings.families[index % Math.max(1, settings.families.length)]),
      ]),
    );
  } finally {
    clearInterval(ticker);
    clearTimeout(statusTimer);
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  }
  const learnedFigures = (await watch?.stop()) ?? {};
  const statusText = await status?.catch((error: unknown) => `status failed: ${(error as Error).message}`);
  const elapsedSeconds = (Date.now() - started) / 1000;
  const log = sandbox.requestLog();
  const credentials = JSON.parse(readFileSync(config.credentialsPath, 'utf8')) as Record<
    string,
    { username: string; password: string }
  >;
  await broker.close();

  const rows = classRows(settings, hits, log, learnedFigures);
  const secrets = [
    ...new Set([...hits.map((hit) => hit.token), ...Object.values(credentials).map((c) => c.password)]),
  ];
  const haystack = `${logs.join('\n')}\n${clientTelemetry.dump()}`;
  return {
    settings,
    rows,
    excesses: spanExcesses(rows.flatMap((row) => row.busiest)),
    clientErrors,
    vendor401: hits.filter((hit) => hit.status === 401).length,
    secretsInLogs: secrets.reduce((total, secret) => total + haystack.split(secret).length - 1, 0),
    elapsedSeconds,
    ...(statusText === undefined ? {} : { status: statusText }),
  };
}

type RefusingLog = VendorLogEntry & { requestId: string; refusedBy?: { family?: string; limit?: number } };

/** The table's figures, from what the clients saw (send times, classes) and what the vendor logged. */
export function classRows(
  settings: ClassesSoakSettings,
  hits: readonly VendorHit[],
  log: readonly RefusingLog[],
  learnedFigures: Record<string, LearnedClassFigures> = {},
): ClassRow[] {
  const byRequestId = new Map(log.map((entry) => [entry.requestId, entry]));
  const quotas = [
    { family: undefined, limits: settings.limits },
    ...settings.families.map((f) => ({ family: f.name as string | undefined, limits: f.limits })),
  ];
  const figures = busiestSpans(log, quotas);
  return quotas.map(({ family, limits }) => {
    const ofClass = hits.filter((hit) => family === undefined || hit.family === family);
    const learned = family !== undefined && settings.variant === 'learned';
    const firstSent = Math.min(...ofClass.map((hit) => hit.sentAt));
    // The first answer of the class (2xx or 429: both carry the X-RateLimit-* that teach the broker).
    const firstAnswer = learned ? Math.min(...ofClass.map((hit) => hit.at)) : Number.NEGATIVE_INFINITY;
    // 429s this quota's own limits caused: a family's refusal names it, a general one names no family.
    const refusedHere = hits.filter((hit) => {
      const entry = hit.requestId === undefined ? undefined : byRequestId.get(hit.requestId);
      return hit.status === 429 && entry?.served === false && entry.refusedBy?.family === family;
    });
    const learning = refusedHere.filter((hit) => hit.sentAt < firstAnswer).length;
    // After learning, refused by a limit that no answer of the class had named before the request left.
    const refusingLimit = (hit: VendorHit) => byRequestId.get(hit.requestId ?? '')?.refusedBy?.limit;
    const unnamedLimits = refusedHere
      .filter((hit) => hit.sentAt >= firstAnswer)
      .filter(
        (hit) => !ofClass.some((answer) => answer.named === refusingLimit(hit) && answer.at < hit.sentAt),
      )
      .map(refusingLimit);
    const perUnnamed = new Map<number | undefined, number>();
    for (const limit of unnamedLimits) perUnnamed.set(limit, (perUnnamed.get(limit) ?? 0) + 1);
    const served = log.filter((entry) => entry.served && (family === undefined || entry.family === family));
    const limitsMs: LimitMs[] = limits.map((l) => ({ limit: l.limit, windowMs: l.windowSeconds * 1000 }));
    const byKey = new Map<string, number[]>();
    for (const entry of served) {
      if (entry.at < firstAnswer) continue;
      const times = byKey.get(entry.quotaKey);
      if (times) times.push(entry.at);
      else byKey.set(entry.quotaKey, [entry.at]);
    }
    let used = 0;
    let allowed = 0;
    for (const times of byKey.values()) {
      times.sort((a, b) => a - b);
      used += times.length;
      allowed += mostAllowed(limitsMs, Math.max(firstAnswer, times[0] ?? 0), times.at(-1) ?? 0);
    }
    return {
      variant: settings.variant,
      quota: family ?? 'general',
      limits,
      told: !learned,
      requests: ofClass.length,
      served: served.length,
      vendor429Learning: learning,
      vendor429After: refusedHere.length - learning,
      vendor429AfterUnnamed: unnamedLimits.length,
      vendor429PerUnnamedLimit: Math.max(0, ...perUnnamed.values()),
      quotaUsedPct: allowed === 0 ? 0 : Number(((100 * used) / allowed).toFixed(1)),
      busiest: figures.filter((figure) => figure.family === family),
      learnMs:
        learned && ofClass.length > 0
          ? (learnedFigures[family]?.learnedAt ?? firstAnswer) - firstSent
          : undefined,
      ...(learned && family !== undefined
        ? {
            probeFallbacks: learnedFigures[family]?.probeFallbacks ?? 0,
            learnedAtEnd: learnedFigures[family]?.last ?? 'never shown',
          }
        : {}),
    };
  });
}

/** What a classes soak must never show: a 429 after learning, more than one per class before, a span too full. */
export function classesSoakFailures(result: ClassesSoakResult): string[] {
  const failures: string[] = [];
  for (const row of result.rows) {
    const where = `classes (${row.variant}) ${row.quota}`;
    const named = row.vendor429After - row.vendor429AfterUnnamed;
    if (named > 0) failures.push(`${where}: ${named} vendor 429s after learning, by limits already named`);
    if (row.vendor429PerUnnamedLimit > 1)
      failures.push(`${where}: ${row.vendor429PerUnnamedLimit} vendor 429s by one limit before it was named`);
    if (row.vendor429Learning > 1)
      failures.push(`${where}: ${row.vendor429Learning} vendor 429s while learning`);
    if (row.requests === 0) failures.push(`${where}: no request reached the vendor`);
  }
  for (const excess of result.excesses) failures.push(`classes (${result.settings.variant}): ${excess}`);
  if (result.secretsInLogs > 0) failures.push(`${result.secretsInLogs} secrets in the logs`);
  return failures;
}

const limitText = (limits: readonly RateLimit[]) =>
  limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ');

/** A printed row of the classes table. */
export function classesTableRow(row: ClassRow): Record<string, string | number> {
  return {
    quota: row.quota,
    'vendor limits': limitText(row.limits),
    'broker told': row.told ? 'yes' : 'no (learned)',
    requests: row.requests,
    served: row.served,
    '429 learning': row.told ? '-' : row.vendor429Learning,
    '429 after (limit not yet named)': `${row.vendor429After} (${row.vendor429AfterUnnamed})`,
    'quota used after learning': `${row.quotaUsedPct} %`,
    busiest: row.busiest.map((f) => `${f.busiest}/${f.windowSeconds}s`).join(' '),
    'learn s (to the broker)': row.learnMs === undefined ? '-' : (row.learnMs / 1000).toFixed(3),
    'learned at the end (probe again)':
      row.learnedAtEnd === undefined ? '-' : `${row.learnedAtEnd} (${row.probeFallbacks ?? 0} polls)`,
  };
}
