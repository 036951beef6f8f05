import { resolveBrokerTarget } from '../broker-target.js';
import { NotFoundError, UsageError } from '../errors.js';
import { isoSeconds } from '../format.js';
import type { CliIo } from '../io.js';
import { BROKER_OPTIONS, HELP_OPTION, parseCommandLine, wholeSeconds } from '../options.js';
import { classesSection } from '../status/class-limits.js';
import {
  CONSUMER_WINDOW_DEFAULT_SECONDS,
  CONSUMER_WINDOW_MAX_SECONDS,
  type ConsumerPermits,
  readConsumerPermits,
} from '../status/consumer-permits.js';
import { listHealth } from '../status/list-health.js';
import { type StatusEntry, statusEntries, statusTable } from '../status/render.js';

export const STATUS_HELP = `Usage: token-broker status [<set>...] [--json] [--url URL] [--region REGION]
       token-broker status --consumers [--window SECONDS] [--metrics-region REGION] [<set>...] [--json]

Shows every credential set you may see (or only the ones named): its state, the time to its token's
expiry, the last refresh, the last login error with the vendor's requestId, the quota used in each
window (50 a minute and 1000 an hour by default), and the cause in words with its runbook section.
A window with reservations (rateLimits.reservations) also shows each reserved consumer's part and the
shared part: granted in the window (plus the ledger's margin)/its limit, and what is left, e.g.
"25/50 per 1m (order-service 20/23, 3 left; shared 5/27, 22 left)".

States: HEALTHY, REFRESHING (re-login due), DEGRADED (last login failed; the token is still served),
NO_USABLE_TOKEN (consumers get 503), CREDENTIALS_REJECTED (wrong username/password),
ENV_MISMATCH (the vendor's token is for the other environment).

Options:
  --json            the same as JSON (ISO times, Unix-second expiry, causes with codes and runbook anchors)
  --url URL         the broker's Function URL (default: TOKEN_BROKER_URL)
  --region REGION   the SigV4 Region (default: the URL's, else AWS_REGION; "local" for the local broker)
  --consumers       a column per set: each consumer's permits granted/returned/denied over the window, from
                    the broker's CloudWatch metrics (needs cloudwatch:GetMetricData; consumers with no permit
                    in the window are not listed)
  --window SECONDS  the window of --consumers: whole minutes, at most 10800 (default 3600)
  --metrics-region REGION  where the metrics are (default: the broker's Region; needed with a local broker)

The exit code is 0 whenever the broker answered, whatever the sets' health (and if CloudWatch could not be
read for --consumers: the column then says unknown, and why is on stderr).`;

const OPTIONS = {
  ...HELP_OPTION,
  ...BROKER_OPTIONS,
  json: { type: 'boolean' },
  consumers: { type: 'boolean' },
  window: { type: 'string' },
  'metrics-region': { type: 'string' },
} as const;

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
  const parsed = parseCommandLine('status', args, OPTIONS, { min: 0, max: 64, what: 'credential set ids' });
  if (parsed.help) {
    io.stdout.write(`${STATUS_HELP}\n`);
    return 0;
  }
  const target = resolveBrokerTarget('status', io, parsed.values);
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
  io.stderr.write(`token-broker status: asking ${target.url} …\n`);
  const sets = await listHealth(target, io);
  const wanted = parsed.positionals;
  const missing = wanted.filter((id) => !sets.some((set) => set.id === id));
  if (missing.length > 0) {
    // The broker lists only the sets this caller may use; it does not say whether others exist.
    throw new NotFoundError(`not among the sets you may see: ${missing.join(', ')}`);
  }
  const now = io.clock.now();
  let entries = statusEntries(wanted.length > 0 ? sets.filter((set) => wanted.includes(set.id)) : sets, now);
  if (windowSeconds !== undefined)
    entries = await withConsumerPermits(entries, io, metricsRegion, windowSeconds);
  if (parsed.values.json) {
    io.stdout.write(
      `${JSON.stringify({ at: new Date(now).toISOString(), credentialSets: entries }, null, 2)}\n`,
    );
  } else if (entries.length === 0) {
    io.stdout.write('no credential sets: this caller may use none\n');
  } else {
    io.stdout.write(
      `${statusTable(entries, now, windowSeconds === undefined ? {} : { consumersWindowSeconds: windowSeconds })}\n`,
    );
    io.stdout.write(classesSection(entries, now));
    io.stderr.write(`token-broker status: ${entries.length} set(s) at ${isoSeconds(now)}\n`);
  }
  return 0;
}
