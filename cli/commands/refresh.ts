import { resolveBrokerTarget } from '../broker-target.js';
import { cliBrokerClient } from '../cli-broker-client.js';
import { formatDuration, isoSeconds } from '../format.js';
import type { CliIo } from '../io.js';
import { BROKER_OPTIONS, HELP_OPTION, parseCommandLine } from '../options.js';
import { checkSetId } from '../set-id.js';

export const REFRESH_HELP = `Usage: token-broker refresh <set> [--json] [--url URL | --stage STAGE] [--region REGION]

Forces a re-login of credential set <set> now, through the deployed broker (its refresher), and prints the
new token's id and expiry: never the token. For a token the vendor stopped honouring, or right after
"token-broker put-credentials". However many run it at once, the set is logged in once: the others print
the same new token, marked "logged in 2s ago by another request" (a token less than a minute old is not
replaced: the refresher allows one login attempt a minute per set).

Allowed to operators whose entry in the stage has "refresh": true; consumers and status-only operators
get 403 INSUFFICIENT_PERMISSIONS. A login that fails (or is held back by the last failure's cooldown)
prints its cause, e.g. INVALID_CREDENTIALS, and exits 1; the previous token, if still valid, is still served. Every call is in the vend function's request log (route forceRefresh).

Options:
  --json            print the answer as JSON: credentialSet, tokenId, expiresAt, loggedIn, refreshedAt, replacedTokenId
  --url URL         the broker's Function URL (default: --stage's, else TOKEN_BROKER_URL)
  --stage STAGE     the broker of a deployed stage (infra/stages/ or a JSON stage file): the VendUrl output of
                    its stack TokenBroker-<stage> in the stage's Region
  --region REGION   the SigV4 Region (default: the URL's, else AWS_REGION; "local" for the local broker)`;

const OPTIONS = { ...HELP_OPTION, ...BROKER_OPTIONS, json: { type: 'boolean' } } as const;

export async function refreshCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine('refresh', args, OPTIONS, {
    min: 1,
    max: 1,
    what: 'the credential set id',
  });
  if (parsed.help) {
    io.stdout.write(`${REFRESH_HELP}\n`);
    return 0;
  }
  const setId = checkSetId('refresh', parsed.positionals[0]);
  const target = await resolveBrokerTarget('refresh', io, parsed.values);
  const client = cliBrokerClient(target, io);
  try {
    const answer = await client.forceRefresh(setId);
    if (parsed.values.json) {
      io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
      return 0;
    }
    const at = answer.refreshedAt === undefined ? Number.NaN : Date.parse(answer.refreshedAt);
    const ago = Number.isNaN(at) ? '' : ` ${formatDuration(Math.max(0, (io.clock.now() - at) / 1000))} ago`;
    const by = answer.loggedIn ? 'logged in' : `logged in${ago} by another request`;
    const replaced = answer.replacedTokenId ? `, replaces ${answer.replacedTokenId}` : '';
    io.stdout.write(
      `${answer.credentialSet} (${answer.environment}): token ${answer.tokenId} ${by}${replaced}; expires ${isoSeconds(answer.expiresAt * 1000)} (in ${formatDuration(answer.expiresInSeconds)})\n`,
    );
    return 0;
  } finally {
    await client.close();
  }
}
