/**
 * `npm run sandbox -- [--env uat|prod] [--port N] [--settings FILE]`: one vendor environment on 127.0.0.1.
 * The first stdout line is exactly `sandbox <env> listening on <url>` (scripts read the URL from it);
 * request log lines go to stderr. Exit 2 on a wrong flag or settings file.
 */
import { ConfigurationError } from '../shared/errors.js';
import { parseCliOptions, USAGE } from './cli-options.js';
import { startSandbox } from './server.js';
import { defaultSandboxUsers } from './users.js';

async function main(): Promise<void> {
  let options: Awaited<ReturnType<typeof parseCliOptions>>;
  try {
    options = await parseCliOptions(process.argv.slice(2), process.env);
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    process.stderr.write(`sandbox: ${error.message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  if (options.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const { environment, port, settings } = options;
  const sandbox = await startSandbox({ environment, port, ...settings });
  process.stdout.write(`sandbox ${environment} listening on ${sandbox.url}\n`);
  if (settings.users) {
    // Users from a settings file are the caller's; their passwords are not ours to print.
    for (const user of settings.users)
      process.stdout.write(`  user ${user.username} (${user.companyRole})\n`);
  } else {
    for (const user of defaultSandboxUsers(environment)) {
      process.stdout.write(
        `  user ${user.username} password ${user.password} (${user.companyRole}, tenant ${user.tenant}) [sandbox only]\n`,
      );
    }
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`sandbox ${environment}: ${signal}, closing\n`);
    sandbox.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`sandbox: ${message}\n`);
  process.exit(error instanceof ConfigurationError ? 2 : 1);
});
