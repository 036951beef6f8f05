import type { VendedToken } from '../../client/types.js';
import { resolveBrokerTarget } from '../broker-target.js';
import { cliBrokerClient } from '../cli-broker-client.js';
import { inTheFlagsTyped } from '../flag-names.js';
import { formatDuration } from '../format.js';
import type { CliIo } from '../io.js';
import { BROKER_OPTIONS, HELP_OPTION, parseCommandLine, wholeSeconds } from '../options.js';
import { checkSetId } from '../set-id.js';

export const TOKEN_HELP = `Usage: token-broker token <set> [--min-validity SECONDS] [--json] [--url URL | --stage STAGE] [--region REGION]

Prints the access token of credential set <set> on stdout, and nothing else (for scripts:
TOKEN=$(npx token-broker token uat-advisor)). Progress and errors go to stderr.

Options:
  --min-validity S  the token must stay valid at least S more seconds (default 300, the vendor's
                    5-minute rule; at most the set's soft threshold); the broker re-logs in if needed
  --json            print the whole answer as JSON instead: token, tokenId, expiresAt, tenant, keys …
  --url URL         the broker's Function URL (default: --stage's, else TOKEN_BROKER_URL)
  --stage STAGE     the broker of a deployed stage (infra/stages/ or a JSON stage file): the VendUrl output of
                    its stack TokenBroker-<stage> in the stage's Region (with --region, a two-Region stage's
                    stack in that Region), read with cloudformation:DescribeStacks
  --region REGION   the SigV4 Region (default: the URL's, else AWS_REGION; "local" for the local broker)

Credentials: the default AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, roles).
A 503 TOKEN_UNAVAILABLE (a re-login in progress) is retried up to 3 times within 30 s, as Retry-After says.`;

const OPTIONS = {
  ...HELP_OPTION,
  ...BROKER_OPTIONS,
  'min-validity': { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** The broker's request fields that this command's options set, as the operator typed them. */
const FLAG_OF_FIELD = { minValiditySeconds: '--min-validity' };

/** The token answer for --json: the client keeps `accessToken` out of enumeration, so it is named here. */
function tokenJson(token: VendedToken) {
  return {
    credentialSet: token.credentialSet,
    environment: token.environment,
    accessToken: token.accessToken,
    tokenId: token.tokenId,
    expiresAt: token.expiresAt,
    expiresInSeconds: token.expiresInSeconds,
    tenant: token.tenant,
    companyKey: token.companyKey,
    executionPlatformKey: token.executionPlatformKey,
    userKey: token.userKey,
    quota: token.quota,
  };
}

export async function tokenCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine('token', args, OPTIONS, { min: 1, max: 1, what: 'the credential set id' });
  if (parsed.help) {
    io.stdout.write(`${TOKEN_HELP}\n`);
    return 0;
  }
  const setId = checkSetId('token', parsed.positionals[0]);
  const minValiditySeconds = wholeSeconds('token', 'min-validity', parsed.values['min-validity']);
  const target = await resolveBrokerTarget('token', io, parsed.values);
  const client = cliBrokerClient(target, io);
  try {
    const token = await client
      .getToken(setId, minValiditySeconds === undefined ? {} : { minValiditySeconds })
      .catch((error: unknown) => {
        throw inTheFlagsTyped(error, 'token', FLAG_OF_FIELD);
      });
    io.stderr.write(
      `token-broker token: ${token.credentialSet} (${token.environment}) token ${token.tokenId}, expires in ${formatDuration(token.expiresInSeconds)}\n`,
    );
    io.stdout.write(
      parsed.values.json ? `${JSON.stringify(tokenJson(token), null, 2)}\n` : `${token.accessToken}\n`,
    );
    return 0;
  } finally {
    await client.close();
  }
}
