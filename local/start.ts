/**
 * `npm start`: the whole broker on this machine. Settings: local/broker.config.json (or BROKER_CONFIG),
 * BROKER_PORT, TIME_SCALE, BROKER_DATA_DIR, BROKER_DYNAMODB_ENDPOINT, LOG_LEVEL (debug|info|warn|error).
 *
 * package.json runs it as `exec node --import tsx local/start.ts` (after tools/require-node.mjs has checked the
 * Node major, in a process of its own that has ended): one process, the one npm signals. npm runs a
 * script through `sh -c` and forwards SIGINT/SIGTERM to that shell only; dash (Debian's, Ubuntu's /bin/sh)
 * neither execs a lone command nor passes a signal on, so SIGINT waited forever and SIGTERM ended the shell and
 * left the broker running with its ports. `exec` takes the shell out, and `--import tsx` the tsx CLI, a second
 * parent that relays signals to its child node.
 */
import { BrokerError } from '../shared/errors.js';
import { LOCAL_LEDGER_TABLE, LOCAL_TOKENS_TABLE, startLocalBroker } from './broker.js';
import { loadLocalConfig } from './config.js';
import { ConsoleTelemetry } from './console-telemetry.js';

function exampleCommand(
  vendUrl: string,
  region: string,
  caller: { accessKeyId: string; secretAccessKey: string },
  setId: string,
) {
  return `curl -s --aws-sigv4 "aws:amz:${region}:lambda" --user "${caller.accessKeyId}:${caller.secretAccessKey}" "${vendUrl}/v1/credential-sets/${setId}/token"`;
}

async function main(): Promise<void> {
  const config = loadLocalConfig();
  const level = (process.env.LOG_LEVEL ?? 'info') as 'debug' | 'info' | 'warn' | 'error';
  const telemetry = new ConsoleTelemetry({ level });
  const broker = await startLocalBroker(config, { telemetry });
  const firstRun = await broker.refreshNow();

  const out: string[] = [];
  out.push(`token-broker (local) listening on ${broker.vendUrl}   [time scale ${config.timeScale}]`);
  for (const [environment, sandbox] of Object.entries(broker.sandboxes)) {
    out.push(`vendor sandbox ${environment}: ${sandbox.url}`);
  }
  out.push(
    config.dynamoDbEndpoint
      ? `DynamoDB: ${broker.dynamoEndpoint} (external; tables ${LOCAL_TOKENS_TABLE}, ${LOCAL_LEDGER_TABLE})`
      : `dynalite: ${broker.dynamoEndpoint}${config.dataDir ? ` (data in ${config.dataDir})` : ' (in memory)'}`,
  );
  out.push('');
  out.push('credential sets:');
  for (const set of firstRun.sets) {
    out.push(
      `  ${set.credentialSetId.padEnd(16)} ${set.usable ? 'token ready' : `no token yet (${set.errorCode ?? set.action})`}`,
    );
  }
  out.push('');
  out.push(`local callers (SigV4, region "${config.region}", service "lambda"; local-only keys):`);
  for (const caller of config.callers) {
    const allowed =
      config.consumers.find((c) => c.principalArn === caller.principalArn)?.credentialSets ?? [];
    out.push(
      `  ${caller.name}: AWS_ACCESS_KEY_ID=${caller.accessKeyId} AWS_SECRET_ACCESS_KEY=${caller.secretAccessKey}`,
    );
    const operator = config.operators.find((o) => o.principalArn === caller.principalArn);
    const status = operator
      ? `; status of: ${operator.credentialSets?.join(', ') ?? 'every set'}${operator.refresh ? ' (may force re-logins)' : ''}`
      : '';
    out.push(`    as ${caller.principalArn}, may use: ${allowed.join(', ') || '(none)'}${status}`);
  }
  const caller = config.callers[0];
  const setId = config.consumers.find((c) => c.principalArn === caller?.principalArn)?.credentialSets[0];
  if (caller && setId) {
    out.push('');
    out.push('try:');
    out.push(`  ${exampleCommand(broker.vendUrl, config.region, caller, setId)}`);
  }
  const operator = config.callers.find((c) =>
    config.operators.some((o) => o.principalArn === c.principalArn),
  );
  if (operator) {
    const env = `TOKEN_BROKER_URL=${broker.vendUrl} AWS_REGION=${config.region} AWS_ACCESS_KEY_ID=${operator.accessKeyId} AWS_SECRET_ACCESS_KEY=${operator.secretAccessKey}`;
    out.push('status as an operator (no token rights):');
    out.push(`  ${env} npx token-broker status`);
    const refresher =
      config.operators.find((o) => o.principalArn === operator.principalArn)?.refresh === true;
    if (refresher && setId) {
      out.push('force a re-login as that operator (prints the new token id, never the token):');
      out.push(`  ${env} npx token-broker refresh ${setId}`);
    }
  }
  out.push('');
  out.push('Ctrl-C stops everything.');
  // Listening before the banner says so: whoever reads it may signal at once, and a signal with no listener
  // would end the process without closing anything.
  let stopping = false;
  const stop = (signal: string) => {
    // One Ctrl-C arrives twice (from the terminal to the group, and forwarded by npm): a second signal is not
    // a more urgent request.
    if (stopping) return;
    stopping = true;
    telemetry.info('shutting down', { signal });
    broker.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.stdout.write(`${out.join('\n')}\n`);
}

/** The one line `npm start` prints for a failure it can explain; anything else as it is. */
function failureMessage(error: unknown): string {
  if (error instanceof BrokerError) return error.message;
  const { code, port } = (error ?? {}) as { code?: unknown; port?: unknown };
  if (code === 'EADDRINUSE')
    return `port ${String(port)} on 127.0.0.1 is already in use (another npm start?): set BROKER_PORT to a free port, or BROKER_PORT=0 for any free one`;
  if (code === 'EACCES')
    return `port ${String(port)} on 127.0.0.1 may not be used by this user: set BROKER_PORT above 1023, or BROKER_PORT=0 for any free one`;
  return error instanceof Error ? error.message : String(error);
}

main().catch((error: unknown) => {
  const message = failureMessage(error);
  process.stderr.write(`token-broker: ${message}\n`);
  process.exit(2);
});
