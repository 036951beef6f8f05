import { CHECK_CONFIG_HELP, checkConfigCommand } from './commands/check-config.js';
import { PUT_CREDENTIALS_HELP, putCredentialsCommand } from './commands/put-credentials.js';
import { SECRET_POLICY_HELP, secretPolicyCommand } from './commands/secret-policy.js';
import { STATUS_HELP, statusCommand } from './commands/status.js';
import { TOKEN_HELP, tokenCommand } from './commands/token.js';
import { UsageError } from './errors.js';
import { EXIT_CODES_HELP, ExitCode, failureOf } from './exit-codes.js';
import { type CliIo, processIo } from './io.js';

const COMMANDS: Record<string, { run: (args: string[], io: CliIo) => Promise<number>; help: string }> = {
  token: { run: tokenCommand, help: TOKEN_HELP },
  status: { run: statusCommand, help: STATUS_HELP },
  'check-config': { run: checkConfigCommand, help: CHECK_CONFIG_HELP },
  'put-credentials': { run: putCredentialsCommand, help: PUT_CREDENTIALS_HELP },
  'secret-policy': { run: secretPolicyCommand, help: SECRET_POLICY_HELP },
};

export const MAIN_HELP = `Usage: token-broker <command> [options]     (npx token-broker …)

The operator's and the pipelines' tool for the token broker: tokens for smoke tests, the health of every
credential set, stage checks before a deploy, and new vendor credentials.

Commands:
  token <set>            print a credential set's access token on stdout (nothing else)
  status [<set>...]      state, expiry, last refresh, last error and vendor requestId, quota used, cause
  check-config <stage>   validate a stage's configuration before deploying it (offline; --secrets asks AWS)
  put-credentials <set>  write a set's vendor username and password (from stdin or a prompt) to its secret
  secret-policy <stage>  print the resource policy every vendor secret of the stage carries

Run "token-broker <command> --help" for a command's options.

Broker: --url or TOKEN_BROKER_URL (the stack output VendUrl, or the local broker's URL); SigV4 Region:
--region, the Function URL's own, or AWS_REGION ("local" for the local broker); AWS credentials: the
default chain. Progress and errors go to stderr; only results go to stdout.

${EXIT_CODES_HELP}`;

/** Runs one command line; returns the exit code. Never throws. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const topic = name === 'help' && args[0] ? COMMANDS[args[0]] : undefined;
    (name === undefined ? io.stderr : io.stdout).write(`${topic?.help ?? MAIN_HELP}\n`);
    return name === undefined ? ExitCode.Usage : ExitCode.Ok;
  }
  const command = COMMANDS[name];
  try {
    if (!command)
      throw new UsageError(
        `unknown command "${name.slice(0, 40)}"; commands: ${Object.keys(COMMANDS).join(', ')}`,
      );
    return await command.run(args, io);
  } catch (error) {
    const failure = failureOf(error);
    const label = command ? `token-broker ${name}` : 'token-broker';
    const requestId = failure.requestId ? ` (broker requestId ${failure.requestId})` : '';
    const hint =
      error instanceof UsageError
        ? ` (see "token-broker ${error.command ? `${error.command} ` : ''}--help")`
        : '';
    io.stderr.write(`${label}: error ${failure.code}: ${failure.message}${requestId}${hint}\n`);
    return failure.exit;
  }
}

/** The bin's entry: the real process. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  return runCli(argv, processIo());
}
