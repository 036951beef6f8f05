import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { ConfigurationError } from '../shared/errors.js';
import { VENDOR_ENVIRONMENTS, type VendorEnvironment } from '../shared/vendor-client/types.js';
import { describeIssues, type MutableSandboxSettings, mutableSettingsSchema } from './settings.js';
import { type SandboxUser, sandboxUsersSchema } from './users.js';

export const USAGE = `Usage: npm run sandbox -- [--env uat|prod] [--port N] [--settings FILE]

Starts a sandbox of the vendor API on 127.0.0.1 and prints "sandbox <env> listening on <url>".
  --env        vendor environment to imitate (default uat)
  --port       port to listen on; 0 = a free port (default: $SANDBOX_PORT, else 0)
  --settings   JSON file: users, tokenLifetimeSeconds, limits, windowKind, families, recordRequests,
               invalidatePreviousTokenOnLogin, rateLimitScope, envClaim, failureRate, failureStatuses,
               latencyMs, outage, loginOutage, clockOffsetSeconds, quiet
  --help       this text
Endpoint families (default: reports under /reports/ at 10/60 s + 60/3600 s, rebalancing under /rebalancing/
at 4/60 s + 20/3600 s) count against their own limits and the general ones; "families": [] turns them off.
Operator endpoints while it runs: GET /_sandbox/stats, POST /_sandbox/settings, POST /_sandbox/faults,
POST /_sandbox/reset-stats.`;

export type FileSettings = Partial<MutableSandboxSettings> & { users?: SandboxUser[] };

export type CliOptions =
  | { help: true }
  | { help: false; environment: VendorEnvironment; port: number; settings: FileSettings };

const fileSettingsSchema = mutableSettingsSchema.extend({ users: sandboxUsersSchema.optional() });

function parsePort(value: string, source: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) {
    throw new ConfigurationError(`${source} must be an integer from 0 to 65535`);
  }
  return port;
}

/** Reads and validates a settings file; the error names the file and the bad fields, never their values. */
export async function loadSettingsFile(path: string): Promise<FileSettings> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigurationError(`--settings: cannot read ${path}`, { cause: error });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigurationError(`--settings: ${path} is not valid JSON`, { cause: error });
  }
  const parsed = fileSettingsSchema.safeParse(json);
  if (!parsed.success) throw new ConfigurationError(`--settings ${path}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** Flags first, then SANDBOX_PORT; throws ConfigurationError on anything wrong. */
export async function parseCliOptions(argv: string[], env: NodeJS.ProcessEnv): Promise<CliOptions> {
  let values: { env?: string; port?: string; settings?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        env: { type: 'string' },
        port: { type: 'string' },
        settings: { type: 'string' },
        help: { type: 'boolean' },
      },
    }));
  } catch (error) {
    throw new ConfigurationError(error instanceof Error ? error.message : String(error));
  }
  if (values.help) return { help: true };
  const environment = values.env ?? 'uat';
  if (!(VENDOR_ENVIRONMENTS as readonly string[]).includes(environment)) {
    throw new ConfigurationError(`--env must be one of ${VENDOR_ENVIRONMENTS.join(', ')}`);
  }
  const port =
    values.port !== undefined
      ? parsePort(values.port, '--port')
      : env.SANDBOX_PORT !== undefined && env.SANDBOX_PORT !== ''
        ? parsePort(env.SANDBOX_PORT, 'SANDBOX_PORT')
        : 0;
  const settings = values.settings !== undefined ? await loadSettingsFile(values.settings) : {};
  return { help: false, environment: environment as VendorEnvironment, port, settings };
}
