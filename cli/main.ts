import { closestKey } from '../shared/config/unknown-keys.js';
import { UsageError } from './errors.js';
import { EXIT_CODES_HELP, ExitCode, failureLine } from './exit-codes.js';
import { type CliIo, processIo } from './io.js';
import { cliVersion, versionLine } from './version.js';

interface Command {
  run: (args: string[], io: CliIo) => Promise<number>;
  help: string;
}

/**
 * Each command's module is loaded when it runs (or its help is asked for): `--help` and a usage error start
 * without the AWS SDK, the client or the stage files (in the built CLI, each command is a chunk of its own).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  token: async () => {
    const { tokenCommand, TOKEN_HELP } = await import('./commands/token.js');
    return { run: tokenCommand, help: TOKEN_HELP };
  },
  status: async () => {
    const { statusCommand, STATUS_HELP } = await import('./commands/status.js');
    return { run: statusCommand, help: STATUS_HELP };
  },
  refresh: async () => {
    const { refreshCommand, REFRESH_HELP } = await import('./commands/refresh.js');
    return { run: refreshCommand, help: REFRESH_HELP };
  },
  'check-config': async () => {
    const { checkConfigCommand, CHECK_CONFIG_HELP } = await import('./commands/check-config.js');
    return { run: checkConfigCommand, help: CHECK_CONFIG_HELP };
  },
  'put-credentials': async () => {
    const { putCredentialsCommand, PUT_CREDENTIALS_HELP } = await import('./commands/put-credentials.js');
    return { run: putCredentialsCommand, help: PUT_CREDENTIALS_HELP };
  },
  'secret-policy': async () => {
    const { secretPolicyCommand, SECRET_POLICY_HELP } = await import('./commands/secret-policy.js');
    return { run: secretPolicyCommand, help: SECRET_POLICY_HELP };
  },
};

const commandNamed = (name: string) => (Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined);

/** Words the command line takes in a command's place besides the commands. */
const OTHER_WORDS = ['help', 'version'];

/** "unknown command", with the command it most likely meant (one or two typing slips), else the list. */
function unknownCommand(name: string): UsageError {
  const shown = name.slice(0, 40);
  const meant = closestKey(name, [...Object.keys(COMMANDS), ...OTHER_WORDS]);
  return new UsageError(
    meant
      ? `unknown command "${shown}"; did you mean "${meant}"?`
      : `unknown command "${shown}"; commands: ${Object.keys(COMMANDS).join(', ')}`,
  );
}

export const MAIN_HELP = `Usage: token-broker <command> [options]     (npx token-broker …)

The operator's and the pipelines' tool for the token broker: tokens for smoke tests, the health of every
credential set, stage checks before a deploy, and new vendor credentials.

Commands:
  token <set>            print a credential set's access token on stdout (nothing else)
  status [<set>...]      each set's state, token expiry and age, quota used, cause (--wide: all; --watch)
  refresh <set>          force a re-login of a set now; prints the new token's id and expiry (operators)
  check-config <stage>   validate a stage's configuration before deploying it (offline; --secrets asks AWS)
  put-credentials <set>  write a set's vendor username and password (from stdin or a prompt) to its secret
  secret-policy <stage>  print the resource policy every vendor secret of the stage carries
  version                print the CLI's version and the commit it was built from (also --version)

Run "token-broker <command> --help" for a command's options.

Broker: --url, else --stage (the VendUrl output of the stage's stack, read from CloudFormation), else
TOKEN_BROKER_URL (the local broker's URL, or a VendUrl); SigV4 Region: --region, the Function URL's own, or
AWS_REGION ("local" for the local broker); AWS credentials: the default chain. A misspelt command or option
gets the closest known one ("did you mean"). Progress and errors go to stderr; only results go to stdout.

${EXIT_CODES_HELP}`;

/** Runs one command line; returns the exit code. Never throws. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const load = name === 'help' && args[0] ? commandNamed(args[0]) : undefined;
    const topic = load ? await load() : undefined;
    (name === undefined ? io.stderr : io.stdout).write(`${topic?.help ?? MAIN_HELP}\n`);
    return name === undefined ? ExitCode.Usage : ExitCode.Ok;
  }
  if (name === '--version' || name === 'version') {
    if (args.length > 0) {
      io.stderr.write(
        `token-broker: error USAGE_ERROR: ${name} takes no arguments (see "token-broker --help")\n`,
      );
      return ExitCode.Usage;
    }
    io.stdout.write(`${versionLine(cliVersion())}\n`);
    return ExitCode.Ok;
  }
  const load = commandNamed(name);
  try {
    if (!load) throw unknownCommand(name);
    const command = await load();
    return await command.run(args, io);
  } catch (error) {
    const { exit, line } = failureLine(load ? `token-broker ${name}` : 'token-broker', error);
    io.stderr.write(`${line}\n`);
    return exit;
  }
}

/** The bin's entry: the real process. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  return runCli(argv, processIo());
}
