import { resolveBrokerTarget } from '../broker-target.js';
import { NotFoundError, UsageError } from '../errors.js';
import { isoSeconds } from '../format.js';
import type { CliIo } from '../io.js';
import { BROKER_OPTIONS, HELP_OPTION, parseCommandLine, wholeSeconds } from '../options.js';
import {
  CONSUMER_WINDOW_DEFAULT_SECONDS,
  CONSUMER_WINDOW_MAX_SECONDS,
  type ConsumerPermits,
  readConsumerPermits,
} from '../status/consumer-permits.js';
import { healthExit, isWell } from '../status/health-exit.js';
import { listHealth } from '../status/list-health.js';
import { NARROW_DEFAULT_WIDTH } from '../status/narrow-table.js';
import { type StatusEntry, statusEntries } from '../status/render.js';
import { type StatusLayout, statusText } from '../status/status-text.js';
import { WATCH_DEFAULT_SECONDS, WATCH_MIN_SECONDS, watchRounds } from '../status/watch.js';

export const STATUS_HELP = `Usage: token-broker status [<set>...] [--wide] [--watch [SECONDS]] [--json] [--url URL | --stage STAGE] [--region REGION]
       token-broker status --consumers [--window SECONDS] [--metrics-region REGION] [<set>...] [--json]

Shows every credential set you may see (or only the ones named), one line each, as wide as the terminal
(100 characters when stdout is not one): its state, the time to its token's expiry, the token's age (since
its last refresh), the quota used in each window (50 a minute and 1000 an hour by default, "25/50 1m"), and
the cause as error codes and runbook sections (#section of the runbook).

--wide shows every column: the environment, the last refresh, the last login error with the vendor's
requestId, the next login attempt, class windows, and the cause in words. There a window with reservations
(rateLimits.reservations) also shows each reserved consumer's part and the shared part: granted in the window
(plus the ledger's margin)/its limit, and what is left, e.g.
"25/50 per 1m (order-service 20/23, 3 left; shared 5/27, 22 left)".

States: HEALTHY, REFRESHING (re-login due), DEGRADED (last login failed; the token is still served),
NO_USABLE_TOKEN (consumers get 503), CREDENTIALS_REJECTED (wrong username/password),
ENV_MISMATCH (the vendor's token is for the other environment).

Options:
  --wide            every column (the lines are then about 230 characters wide)
  --watch [SECONDS] ask again every SECONDS (default ${WATCH_DEFAULT_SECONDS}, at least ${WATCH_MIN_SECONDS}) and redraw, until Ctrl-C
  --json            the same as JSON (ISO times, Unix-second expiry, causes with codes and runbook anchors)
  --url URL         the broker's Function URL (default: --stage's, else TOKEN_BROKER_URL)
  --stage STAGE     the broker of a deployed stage (infra/stages/ or a JSON stage file): the VendUrl output of
                    its stack TokenBroker-<stage> in the stage's Region (with --region, a two-Region stage's
                    stack in that Region), read with cloudformation:DescribeStacks
  --region REGION   the SigV4 Region (default: the URL's, else AWS_REGION; "local" for the local broker)
  --consumers       (wide) a column per set: each consumer's permits granted/returned/denied over the window, from
                    the broker's CloudWatch metrics (needs cloudwatch:GetMetricData; consumers with no permit
                    in the window are not listed)
  --window SECONDS  the window of --consumers: whole minutes, at most 10800 (default 3600)
  --metrics-region REGION  where the metrics are (default: the broker's Region; needed with a local broker)

Exit codes by the health of the sets shown (with --json too), so that a pipeline can gate on it; the worst
set decides:
  0  every set is HEALTHY or REFRESHING (also when there is none to show)
  4  a set is DEGRADED (its last login failed; its token is still served)
  5  a set has no token: NO_USABLE_TOKEN, CREDENTIALS_REJECTED or ENV_MISMATCH (consumers get 503)
  1, 2, 3 as for every command: the broker's error, a usage error, unreachable or refused
A state this CLI does not know counts as DEGRADED. --watch shows every round and ends with 0 on Ctrl-C.
If CloudWatch could not be read for --consumers, the column says unknown and why is on stderr; the exit
code is still the sets' health.`;

const OPTIONS = {
  ...HELP_OPTION,
  ...BROKER_OPTIONS,
  json: { type: 'boolean' },
  wide: { type: 'boolean' },
  watch: { type: 'string' },
  consumers: { type: 'boolean' },
  window: { type: 'string' },
  'metrics-region': { type: 'string' },
} as const;

/**
 * `--watch` takes its seconds or none (`--watch`, `--watch 30`, `--watch=30`), which parseArgs cannot say: a
 * bare one gets the default. A set id of digits only goes before `--watch`.
 */
function givingWatchItsValue(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') return [...out, ...args.slice(i)];
    if (arg !== '--watch') out.push(arg);
    else if (/^\d+$/.test(args[i + 1] ?? '')) out.push(`--watch=${args[++i]}`);
    else out.push(`--watch=${WATCH_DEFAULT_SECONDS}`);
  }
  return out;
}

function watchInterval(value: string | undefined): number | undefined {
  const seconds = wholeSeconds('status', 'watch', value);
  if (seconds !== undefined && seconds < WATCH_MIN_SECONDS)
    throw new UsageError(`--watch must be at least ${WATCH_MIN_SECONDS} seconds`, 'status');
  return seconds;
}

/** The window of --consumers, in whole minutes within what Metrics Insights reads. */
function consumerWindow(value: string | undefined): number {
  const seconds = wholeSeconds('status', 'window', value) ?? CONSUMER_WINDOW_DEFAULT_SECONDS;
  if (seconds < 60 || seconds > CONSUMER_WINDOW_MAX_SECONDS || seconds % 60 !== 0) {
    throw new UsageError(
      `--window must be whole minutes from 60 to ${CONSUMER_WINDOW_MAX_SECONDS} seconds (CloudWatch Metrics Insights reads the latest 3 hours)`,
      'status',
    );
  }
  return seconds;
}

/** Each entry with its consumers' permits; on a CloudWatch failure, null and the reason on stderr. */
async function withConsumerPermits(
  entries: StatusEntry[],
  io: CliIo,
  region: string,
  windowSeconds: number,
): Promise<StatusEntry[]> {
  let permits: Map<string, ConsumerPermits[]> | undefined;
  try {
    const client = await io.cloudWatch(region);
    permits = await readConsumerPermits(
      client,
      entries.map((e) => e.id),
      { endMs: io.clock.now(), windowSeconds },
    );
  } catch (error) {
    // The error's name and the action only: an SDK message may quote the caller's ARN.
    const name = (error as { name?: unknown })?.name;
    io.stderr.write(
      `token-broker status: could not read the permits per consumer from CloudWatch in ${region} (${typeof name === 'string' ? name : 'error'}); the operator needs cloudwatch:GetMetricData\n`,
    );
  }
  return entries.map((entry) => ({
    ...entry,
    consumerPermits: permits ? { windowSeconds, consumers: permits.get(entry.id) ?? [] } : null,
  }));
}

export async function statusCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine('status', givingWatchItsValue(args), OPTIONS, {
    min: 0,
    max: 64,
    what: 'credential set ids',
  });
  if (parsed.help) {
    io.stdout.write(`${STATUS_HELP}\n`);
    return 0;
  }
  const target = await resolveBrokerTarget('status', io, parsed.values);
  const consumers = parsed.values.consumers === true;
  const windowSeconds = consumers ? consumerWindow(parsed.values.window) : undefined;
  if (!consumers && (parsed.values.window !== undefined || parsed.values['metrics-region'] !== undefined))
    throw new UsageError('--window and --metrics-region go with --consumers', 'status');
  const metricsRegion = parsed.values['metrics-region'] ?? target.region;
  if (consumers && metricsRegion === 'local') {
    throw new UsageError(
      '--consumers reads CloudWatch: a local broker has no metrics there (give --metrics-region for a deployed stage)',
      'status',
    );
  }
  const watchSeconds = watchInterval(parsed.values.watch);
  if (watchSeconds !== undefined && parsed.values.json)
    throw new UsageError(
      '--watch redraws the table; for JSON, run status --json at your own interval',
      'status',
    );
  const layout: StatusLayout = {
    wide: parsed.values.wide === true || consumers,
    width: (io.stdout.isTTY === true && io.stdout.columns) || NARROW_DEFAULT_WIDTH,
    ...(windowSeconds === undefined ? {} : { consumersWindowSeconds: windowSeconds }),
  };
  const wanted = parsed.positionals;

  /** One reading: the sets asked for, with their diagnosis (and permits per consumer), at this instant. */
  const read = async () => {
    const sets = await listHealth(target, io);
    const missing = wanted.filter((id) => !sets.some((set) => set.id === id));
    if (missing.length > 0) {
      // The broker lists only the sets this caller may use; it does not say whether others exist.
      throw new NotFoundError(`not among the sets you may see: ${missing.join(', ')}`);
    }
    const now = io.clock.now();
    const entries = statusEntries(
      wanted.length > 0 ? sets.filter((set) => wanted.includes(set.id)) : sets,
      now,
    );
    return {
      now,
      entries:
        windowSeconds === undefined
          ? entries
          : await withConsumerPermits(entries, io, metricsRegion, windowSeconds),
    };
  };
  const text = ({ entries, now }: { entries: StatusEntry[]; now: number }) =>
    entries.length === 0 ? NO_SETS : statusText(entries, now, layout);

  io.stderr.write(`token-broker status: asking ${target.url} …\n`);
  if (watchSeconds !== undefined)
    return watchRounds(io, 'token-broker status', watchSeconds, async () => text(await read()));
  const reading = await read();
  const exit = healthExit(reading.entries.map((entry) => entry.state));
  if (parsed.values.json) {
    io.stdout.write(
      `${JSON.stringify({ at: new Date(reading.now).toISOString(), credentialSets: reading.entries }, null, 2)}\n`,
    );
    return exit;
  }
  io.stdout.write(`${text(reading)}\n`);
  if (reading.entries.length > 0)
    io.stderr.write(
      `token-broker status: ${reading.entries.length} set(s) at ${isoSeconds(reading.now)}${healthNote(reading.entries, exit)}\n`,
    );
  return exit;
}

/** Why the exit code is not 0, on the progress line: which sets made it so. */
function healthNote(entries: StatusEntry[], exit: number): string {
  if (exit === 0) return '';
  const sets = entries.filter((entry) => !isWell(entry.state));
  return `; exit ${exit}: ${sets.map((entry) => `${entry.id} ${entry.state}`).join(', ')}`;
}

const NO_SETS = 'no credential sets: this caller may use none';
