import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type Clock, systemClock } from '../shared/clock.js';

/** Standard input as the CLI uses it: a stream, and on a terminal raw mode for hidden input. */
export interface CliInput extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

/**
 * Everything the CLI touches outside itself, so that tests run it in process against the local broker with
 * their own clock, environment and streams, and mock only Secrets Manager.
 */
export interface CliIo {
  /** `isTTY` and `columns` when stdout is a terminal: `status` fits its width and redraws in place. */
  stdout: { write(text: string): unknown; isTTY?: boolean; columns?: number };
  stderr: { write(text: string): unknown };
  stdin: CliInput;
  env: NodeJS.ProcessEnv;
  cwd: string;
  clock: Clock;
  fetch: typeof fetch;
  /** Async: the SDK is loaded only by the commands that talk to Secrets Manager (`--help` starts without it). */
  secretsManager(region: string): Promise<SecretsManagerClient>;
  /** Async too: only `status --consumers` reads CloudWatch (the operator's own credentials, GetMetricData). */
  cloudWatch(region: string): Promise<CloudWatchClient>;
  /** Async too: only `--stage` reads CloudFormation (the stage's stack outputs, DescribeStacks). */
  cloudFormation(region: string): Promise<CloudFormationClient>;
  /**
   * Aborted when the operator stops a command that runs until interrupted (`status --watch`): Ctrl-C or
   * SIGTERM. Asked for by that command only, so that every other one keeps the default handling of a signal.
   */
  interruption(): AbortSignal;
}

export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    clock: systemClock,
    fetch: globalThis.fetch,
    secretsManager: async (region) => {
      const { SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
      return new SecretsManagerClient({ region });
    },
    cloudWatch: async (region) => {
      const { CloudWatchClient } = await import('@aws-sdk/client-cloudwatch');
      return new CloudWatchClient({ region });
    },
    cloudFormation: async (region) => {
      const { CloudFormationClient } = await import('@aws-sdk/client-cloudformation');
      return new CloudFormationClient({ region });
    },
    interruption: () => {
      const controller = new AbortController();
      const stop = () => controller.abort();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      return controller.signal;
    },
  };
}
