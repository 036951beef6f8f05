import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll } from 'vitest';
import type { CliInput, CliIo } from '../../cli/io.js';
import { runCli } from '../../cli/main.js';
import { type LocalBroker, type LocalBrokerOptions, startLocalBroker } from '../../local/broker.js';
import { type LoadedLocalConfig, localConfigSchema } from '../../local/config.js';
import { type Clock, ManualClock, systemClock } from '../../shared/clock.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import type { VendorCredentials } from '../../shared/vendor-client/types.js';

/** The committed local configuration's first caller: may use every set. */
export const PORTFOLIO = {
  AWS_ACCESS_KEY_ID: 'AKIALOCALPORTFOLIO01',
  AWS_SECRET_ACCESS_KEY: 'local-only-portfolio-service-secret',
};
/** The second caller: may use uat-advisor only. */
export const REPORTING = {
  AWS_ACCESS_KEY_ID: 'AKIALOCALREPORTING01',
  AWS_SECRET_ACCESS_KEY: 'local-only-reporting-service-secret',
};

/** The on-call caller: an operator of every set (status only), a consumer of none. */
export const ONCALL = {
  AWS_ACCESS_KEY_ID: 'AKIALOCALONCALL00001',
  AWS_SECRET_ACCESS_KEY: 'local-only-oncall-operator-secret',
};

export interface CliRun {
  exit: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process with captured streams; `stdin` is a string (piped) or a given stream. */
export async function runIn(
  argv: string[],
  options: {
    env?: NodeJS.ProcessEnv;
    clock?: Clock;
    stdin?: string | CliInput;
    secretsManager?: (region: string) => SecretsManagerClient;
    /** CloudWatch has no local stand-in: tests give a client that aws-sdk-client-mock answers for. */
    cloudWatch?: (region: string) => CloudWatchClient;
    /** Nor has CloudFormation (`--stage`): the same. */
    cloudFormation?: (region: string) => CloudFormationClient;
    cwd?: string;
    /** stdout as a terminal of this many columns (isTTY); by default a pipe. */
    terminalColumns?: number;
    /** What Ctrl-C would abort (`status --watch`); by default never aborted. */
    interruption?: AbortSignal;
    /** Sees each write to stdout as it happens (to interrupt a watch after some rounds). */
    onStdout?: (text: string) => void;
  } = {},
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  let stdin: CliInput;
  if (typeof options.stdin === 'string' || options.stdin === undefined) {
    const piped = new PassThrough();
    piped.end(options.stdin ?? '');
    stdin = piped;
  } else stdin = options.stdin;
  const io: CliIo = {
    stdout: {
      write: (text: string) => {
        stdout += text;
        options.onStdout?.(text);
      },
      ...(options.terminalColumns === undefined ? {} : { isTTY: true, columns: options.terminalColumns }),
    },
    stderr: { write: (text: string) => (stderr += text) },
    stdin,
    env: options.env ?? {},
    cwd: options.cwd ?? process.cwd(),
    clock: options.clock ?? systemClock,
    fetch: globalThis.fetch,
    secretsManager: async (region) =>
      options.secretsManager?.(region) ??
      new SecretsManagerClient({
        region,
        credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' },
      }),
    cloudWatch: async (region) =>
      options.cloudWatch?.(region) ??
      new CloudWatchClient({
        region,
        credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' },
      }),
    cloudFormation: async (region) =>
      options.cloudFormation?.(region) ??
      new CloudFormationClient({
        region,
        credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' },
      }),
    interruption: () => options.interruption ?? new AbortController().signal,
  };
  const exit = await runCli(argv, io);
  return { exit, stdout, stderr };
}

/** The sandbox users' passwords and any JWT: none may appear in what the CLI prints, except `token`'s stdout. */
export const SANDBOX_PASSWORDS = [
  'uat-advisor-sandbox-pw',
  'uat-execution-sandbox-pw',
  'prod-advisor-sandbox-pw',
];

export interface CliBroker {
  broker: LocalBroker;
  clock: Clock;
  /** TOKEN_BROKER_URL, AWS_REGION=local and the portfolio-service caller's keys. */
  env: NodeJS.ProcessEnv;
  credentialsPath: string;
  /** Rewrites one secret of the local credentials file (a "new secret version" for the file source). */
  putCredentials(secretId: string, credentials: VendorCredentials): void;
  close(): Promise<void>;
}

/**
 * The local broker (dynalite, both sandboxes, refresher, vend API behind SigV4) on a free port, with the
 * committed configuration and a private copy of its credentials file; no schedule: tests run the refresher.
 */
export async function startCliBroker(
  options: {
    clock?: Clock;
    credentials?: Record<string, VendorCredentials>;
    /** Changes to the committed configuration (as JSON). */
    configure?: (config: Record<string, unknown> & { credentialSets: Record<string, unknown>[] }) => void;
    sandbox?: LocalBrokerOptions['sandbox'];
  } = {},
): Promise<CliBroker> {
  const clock = options.clock ?? new ManualClock(Date.UTC(2026, 0, 5, 9, 0, 0));
  const dir = mkdtempSync(join(tmpdir(), 'cli-broker-'));
  const credentialsPath = join(dir, 'credentials.json');
  const secrets = {
    ...(JSON.parse(readFileSync('local/credentials.json', 'utf8')) as Record<string, VendorCredentials>),
    ...options.credentials,
  };
  writeFileSync(credentialsPath, JSON.stringify(secrets), { mode: 0o600 });
  const raw = JSON.parse(readFileSync('local/broker.config.json', 'utf8'));
  options.configure?.(raw);
  const config: LoadedLocalConfig = {
    ...localConfigSchema.parse({ ...raw, port: 0 }),
    configPath: join(dir, 'broker.config.json'),
    credentialsPath,
  };
  const broker = await startLocalBroker(config, {
    clock,
    telemetry: new MemoryTelemetry(),
    schedule: false,
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
  });
  return {
    broker,
    clock,
    env: { TOKEN_BROKER_URL: broker.vendUrl, AWS_REGION: 'local', ...PORTFOLIO },
    credentialsPath,
    putCredentials(secretId, credentials) {
      secrets[secretId] = credentials;
      writeFileSync(credentialsPath, JSON.stringify(secrets), { mode: 0o600 });
    },
    close: () => broker.close(),
  };
}

/**
 * One local broker for all the tests of a file (startCliBroker with the committed configuration), its tokens
 * obtained once before them: `use` receives it, and it is closed after them.
 */
export function cliBrokerPerFile(use: (started: CliBroker) => void): void {
  let started: CliBroker | undefined;
  beforeAll(async () => {
    started = await startCliBroker();
    await started.broker.refreshNow();
    use(started);
  });
  afterAll(async () => {
    await started?.close();
  });
}
