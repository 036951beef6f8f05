import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BrokerClient, PermitDeadlineError } from '../client/index.js';
import { type SandboxFamily, startSandbox } from '../sandbox/index.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { type LocalBroker, startDynalite, startLocalBroker } from './broker.js';
import type { LoadedLocalConfig } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';
import { type OperatorAccess, operatorStatus, watchLearnedClasses } from './learned-watch.js';
import { authorizationOf, soakConfig } from './soak.js';
import {
  type ClassesSoakResult,
  type ClassReportSent,
  classRows,
  type SoakEvent,
  type VendorHit,
} from './soak-classes-report.js';
import { type ClassesSoakSettings, learnsClasses } from './soak-classes-settings.js';
import { LIAR_CALLER, SoakLiar } from './soak-liar.js';
import { spanExcesses } from './soak-report.js';

export type { ClassesSoakResult, ClassRow } from './soak-classes-report.js';
export {
  CLASSES_SOAK_DEFAULTS,
  CLASSES_VARIANTS,
  type ClassesSoakSettings,
  type ClassesVariant,
  classesVariantSettings,
} from './soak-classes-settings.js';
export { classesSoakFailures, classesTableRow } from './soak-classes-verdict.js';

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
        ...(learnsClasses(settings.variant) ? {} : { limits: family.limits }),
      },
    ]),
  );
}

/**
 * The broker's configuration on the soak's own dynalite and vendor sandbox (so its functions can stop and start
 * again on the same data), with the liar's caller when there is one.
 */
function classesConfig(
  settings: ClassesSoakSettings,
  parts: { dynamoDbEndpoint: string; vendorBaseUrl: string },
): LoadedLocalConfig {
  const config = soakConfig({ ...settings, setIds: [settings.setId], lifetimes: 1 });
  const liar = settings.liar
    ? {
        callers: [...config.callers, LIAR_CALLER],
        consumers: [
          ...config.consumers,
          {
            name: LIAR_CALLER.name,
            principalArn: LIAR_CALLER.principalArn,
            credentialSets: [settings.setId],
          },
        ],
      }
    : {};
  return {
    ...config,
    ...liar,
    dynamoDbEndpoint: parts.dynamoDbEndpoint,
    credentialSets: config.credentialSets.map((set) => {
      // The classes' paths are given in `classes` itself: the parsed `classPaths` of the base set would repeat them.
      const { classPaths: _paths, ...limits } = set.rateLimits;
      // An input of the schema (the object form), parsed again where the local broker reads its sets.
      const rateLimits = { ...limits, classes: classesOf(settings) } as unknown as typeof set.rateLimits;
      return { ...set, vendorBaseUrl: parts.vendorBaseUrl, rateLimits };
    }),
  };
}

const familyOfPath = (families: readonly SandboxFamily[], path: string): string | undefined =>
  families.find((family) => path.startsWith(family.pathPrefix))?.name;

/**
 * `rawDir`: where to write the run's record (classes-<variant>-<start>.json: the settings, the clients' vendor
 * answers with each token replaced by its index, the vendor's log, the operator's view history and the events),
 * from which classRows gives the figures again.
 */
export async function runClassesSoak(
  settings: ClassesSoakSettings,
  progress?: (line: string) => void,
  rawDir?: string,
): Promise<ClassesSoakResult> {
  const offsetMs = (settings.vendorClockOffsetSeconds ?? 0) * 1000;
  const store = await startDynalite(undefined);
  const closeStore = () => new Promise<void>((resolve) => store.server.close(() => resolve()));
  const environment = soakConfig({ ...settings, setIds: [settings.setId], lifetimes: 1 }).credentialSets[0]
    ?.environment;
  if (!environment) throw new Error(`unknown set ${settings.setId}`);
  // What startLocalBroker would start for the set, started here so that it outlives a restart of the broker.
  const sandbox = await startSandbox({
    environment,
    quiet: true,
    tokenLifetimeSeconds: settings.tokenLifetimeSeconds,
    limits: settings.limits,
    windowKind: settings.windowKind,
    invalidatePreviousTokenOnLogin: false,
    families: settings.families,
    recordRequests: true,
    clockOffsetSeconds: settings.vendorClockOffsetSeconds ?? 0,
  }).catch(async (error: unknown) => {
    await closeStore();
    throw error;
  });
  const config = classesConfig(settings, { dynamoDbEndpoint: store.endpoint, vendorBaseUrl: sandbox.url });
  const logs: string[] = [];
  const telemetry = new ConsoleTelemetry({
    level: process.env.SOAK_CLASSES_DEBUG ? 'debug' : 'info',
    write: (line) => logs.push(line),
  });
  let broker: LocalBroker;
  try {
    broker = await startLocalBroker(config, { telemetry });
  } catch (error) {
    await sandbox.close();
    await closeStore();
    throw error;
  }
  // A restart listens where the clients already send.
  const restartConfig = { ...config, port: Number(new URL(broker.vendUrl).port) };
  const events: SoakEvent[] = [];
  const hits: VendorHit[] = [];
  const classReports: ClassReportSent[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const sentAt = Date.now();
    const response = await fetch(input, init);
    const url = String(input instanceof Request ? input.url : input);
    const bearer = authorizationOf(init);
    // A class report the broker took names its limit to the ledger from then on (classRows).
    if (url.endsWith('/rate-limit-reports') && typeof init?.body === 'string') {
      const body = JSON.parse(init.body) as { class?: string; limit?: number };
      if (body.class !== undefined && body.limit !== undefined && response.ok)
        classReports.push({ sentAt, at: Date.now(), class: body.class, limit: body.limit });
    }
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
  const callers = config.callers.filter(
    (c) =>
      c.principalArn !== LIAR_CALLER.principalArn &&
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
    learnsClasses(settings.variant) && access ? watchLearnedClasses(access, settings.setId) : undefined;
  let status: Promise<string> | undefined;
  const statusTimer =
    settings.variant === 'learned' && access
      ? setTimeout(
          () => {
            status = operatorStatus(access, settings.setId);
          },
          (settings.durationSeconds * 2000) / 3,
        )
      : undefined;

  const clientErrors: Record<string, number> = {};
  const liarClient =
    settings.liar &&
    new BrokerClient({
      brokerUrl: broker.vendUrl,
      region: config.region,
      credentials: { accessKeyId: LIAR_CALLER.accessKeyId, secretAccessKey: LIAR_CALLER.secretAccessKey },
      telemetry: clientTelemetry,
    });
  const liar =
    liarClient &&
    new SoakLiar({
      vendUrl: broker.vendUrl,
      region: config.region,
      setId: settings.setId,
      tokenId: async () => (await liarClient.getToken(settings.setId)).tokenId,
    });
  // The loose fake reaches the class on its probe: before any consumer sends, so before any honest answer.
  const loose = settings.liar?.loose;
  if (liar && loose) await liar.report(loose.class, loose.limit, loose.limit - 1, loose.resetSeconds);

  const started = Date.now();
  const deadline = started + settings.durationSeconds * 1000;
  const timers: NodeJS.Timeout[] = [];
  const pending: Promise<unknown>[] = [];
  const at = (fraction: number, action: () => Promise<unknown> | undefined) =>
    timers.push(
      setTimeout(
        () => {
          const done = action();
          if (done) pending.push(done);
        },
        fraction * settings.durationSeconds * 1000,
      ),
    );
  let families = settings.families;
  for (const change of settings.limitChanges ?? []) {
    at(change.atFraction, () => {
      families = families.map((f) => (f.name === change.family ? { ...f, limits: change.limits } : f));
      sandbox.update({ families });
      events.push({ at: Date.now(), label: 'limit change', family: change.family, limits: change.limits });
      return undefined;
    });
  }
  if (settings.restartAtFraction !== undefined) {
    at(settings.restartAtFraction, async () => {
      const stoppedAt = Date.now();
      await broker.close();
      broker = await startLocalBroker(restartConfig, { telemetry });
      events.push({ at: stoppedAt, label: 'restart', downMs: Date.now() - stoppedAt });
    });
  }
  const tight = settings.liar?.tight;
  if (liar && tight) {
    events.push({
      at: started + tight.fromFraction * settings.durationSeconds * 1000,
      label: 'liar',
      family: tight.class,
    });
    events.push({
      at: started + tight.untilFraction * settings.durationSeconds * 1000,
      label: 'liar gone',
      family: tight.class,
    });
    for (
      let t = tight.fromFraction;
      t <= tight.untilFraction + 1e-9;
      t += tight.everySeconds / settings.durationSeconds
    )
      at(t, () => liar.report(tight.class, 1, 0, tight.resetSeconds));
  }
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
        // Its next request would come after the end: stop now rather than sleep past the end for nothing.
        if (nextAt >= deadline) break;
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
        const { code, details } = error as { code?: string; details?: { field?: string } };
        if (code === 'DUPLICATE_KEY') created = true;
        else {
          // The field too, as the windows soak names them: INVALID_VALUE alone says little.
          const name = `${code ?? (error instanceof Error ? error.name : 'UNKNOWN')}${details?.field ? ` (${details.field})` : ''}`;
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
    for (const timer of timers) clearTimeout(timer);
    await Promise.allSettled(pending);
    await Promise.all(
      [...clients, ...(liarClient ? [liarClient] : [])].map((client) =>
        client.close().catch(() => undefined),
      ),
    );
  }
  const learnedFigures = (await watch?.stop()) ?? {};
  const statusText = await status?.catch((error: unknown) => `status failed: ${(error as Error).message}`);
  const elapsedSeconds = (Date.now() - started) / 1000;
  // The vendor logs on its own clock; the clients' times are the broker's.
  const log = sandbox.requestLog().map((entry) => ({ ...entry, at: entry.at - offsetMs }));
  const logins = sandbox.stats().loginRequests;
  const credentials = JSON.parse(readFileSync(config.credentialsPath, 'utf8')) as Record<
    string,
    { username: string; password: string }
  >;
  await broker.close();
  await sandbox.close();
  await closeStore();

  const timeline = {
    startedAt: started,
    // The consumers ask until the deadline; what follows is the report being gathered.
    endedAt: deadline,
    events,
    liarReports: liar?.reports ?? [],
    classReports,
  };
  // The test file's runs too (local/soak-cli.ts: SOAK_CLASSES_RAW_DIR).
  rawDir ??= process.env.SOAK_CLASSES_RAW_DIR || undefined;
  if (rawDir !== undefined) {
    const tokenIndex = new Map(
      [...new Set(hits.map((hit) => hit.token))].map((token, index) => [token, index]),
    );
    const record = {
      settings,
      hits: hits.map((hit) => ({ ...hit, token: String(tokenIndex.get(hit.token)) })),
      log,
      learnedFigures,
      timeline,
    };
    writeFileSync(path.join(rawDir, `classes-${settings.variant}-${started}.json`), JSON.stringify(record));
    if (process.env.SOAK_CLASSES_DEBUG)
      writeFileSync(path.join(rawDir, `classes-${settings.variant}-${started}.log`), logs.join('\n'));
  }
  const rows = classRows(settings, hits, log, learnedFigures, timeline);
  const secrets = [
    ...new Set([
      ...hits.map((hit) => hit.token),
      ...Object.values(credentials).map((c) => c.password),
      ...config.callers.map((c) => c.secretAccessKey),
    ]),
  ];
  const haystack = `${logs.join('\n')}\n${clientTelemetry.dump()}`;
  return {
    settings,
    rows,
    excesses: spanExcesses(rows.flatMap((row) => row.busiest)),
    clientErrors,
    vendor401: hits.filter((hit) => hit.status === 401).length,
    logins,
    tokens: new Set(hits.map((hit) => hit.token)).size,
    secretsInLogs: secrets.reduce((total, secret) => total + haystack.split(secret).length - 1, 0),
    elapsedSeconds,
    events: events.map((event) => ({ ...event, at: (event.at - started) / 1000 })),
    ...(liar ? { liarReports: liar.reports.map((r) => ({ ...r, at: (r.at - started) / 1000 })) } : {}),
    ...(statusText === undefined ? {} : { status: statusText }),
  };
}
