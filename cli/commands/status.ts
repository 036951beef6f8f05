import { resolveBrokerTarget } from '../broker-target.js';
import { NotFoundError } from '../errors.js';
import { isoSeconds } from '../format.js';
import type { CliIo } from '../io.js';
import { BROKER_OPTIONS, HELP_OPTION, parseCommandLine } from '../options.js';
import { listHealth } from '../status/list-health.js';
import { statusEntries, statusTable } from '../status/render.js';

export const STATUS_HELP = `Usage: token-broker status [<set>...] [--json] [--url URL] [--region REGION]

Shows every credential set you may see (or only the ones named): its state, the time to its token's
expiry, the last refresh, the last login error with the vendor's requestId, the quota used in each
window (50 a minute and 1000 an hour by default), and the cause in words with its runbook section.

States: HEALTHY, REFRESHING (re-login due), DEGRADED (last login failed; the token is still served),
NO_USABLE_TOKEN (consumers get 503), CREDENTIALS_REJECTED (wrong username/password),
ENV_MISMATCH (the vendor's token is for the other environment).

Options:
  --json            the same as JSON (ISO times, Unix-second expiry, causes with codes and runbook anchors)
  --url URL         the broker's Function URL (default: TOKEN_BROKER_URL)
  --region REGION   the SigV4 Region (default: the URL's, else AWS_REGION; "local" for the local broker)

The exit code is 0 whenever the broker answered, whatever the sets' health.`;

const OPTIONS = { ...HELP_OPTION, ...BROKER_OPTIONS, json: { type: 'boolean' } } as const;

export async function statusCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine('status', args, OPTIONS, { min: 0, max: 64, what: 'credential set ids' });
  if (parsed.help) {
    io.stdout.write(`${STATUS_HELP}\n`);
    return 0;
  }
  const target = resolveBrokerTarget('status', io, parsed.values);
  io.stderr.write(`token-broker status: asking ${target.url} …\n`);
  const sets = await listHealth(target, io);
  const wanted = parsed.positionals;
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
  if (parsed.values.json) {
    io.stdout.write(
      `${JSON.stringify({ at: new Date(now).toISOString(), credentialSets: entries }, null, 2)}\n`,
    );
  } else if (entries.length === 0) {
    io.stdout.write('no credential sets: this caller may use none\n');
  } else {
    io.stdout.write(`${statusTable(entries, now)}\n`);
    io.stderr.write(`token-broker status: ${entries.length} set(s) at ${isoSeconds(now)}\n`);
  }
  return 0;
}
