import { readFileSync } from 'node:fs';
import { BrokerClient, PermitDeadlineError } from '../client/index.js';
import type { SandboxFamily } from '../sandbox/index.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { startLocalBroker } from './broker.js';
import type { LoadedLocalConfig } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';
import { type OperatorAccess, operatorStatus, watchLearnedClasses } from './learned-watch.js';
import { authorizationOf, soakConfig } from './soak.js';
import { type ClassesSoakResult, classRows, type VendorHit } from './soak-classes-report.js';
import type { ClassesSoakSettings } from './soak-classes-settings.js';
import { spanExcesses } from './soak-report.js';

export {
  type ClassesSoakResult,
  type ClassRow,
  classesSoakFailures,
  classesTableRow,
} from './soak-classes-report.js';
export {
  CLASSES_SOAK_DEFAULTS,
  type ClassesSoakSettings,
  type ClassesVariant,
} from './soak-classes-settings.js';

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
