import { resolveCredentials, resolveRegion } from '../client/aws-auth.js';
import type { AwsCredentialIdentity, CredentialsProvider } from '../client/sigv4.js';
import { parseVendorBaseUrl } from '../shared/vendor-client/vendor-url.js';
import { UsageError } from './errors.js';
import type { CliIo } from './io.js';

/** `--stage`'s broker URL; the module (and the CloudFormation SDK) is loaded only when one is given. */
async function stageUrl(
  command: string,
  io: CliIo,
  options: { stage?: string | undefined; region?: string | undefined },
): Promise<string | undefined> {
  if (options.stage === undefined) return undefined;
  const { stageVendUrl } = await import('./stage-url.js');
  return stageVendUrl(command, io, options.stage, options.region);
}

/** Where the broker is and who we are to it. */
export interface BrokerTarget {
  /** No trailing slash. */
  url: string;
  region: string;
  credentials: AwsCredentialIdentity | CredentialsProvider;
}

/**
 * The broker URL (`--url`, else `--stage`'s: its stack's VendUrl output, else TOKEN_BROKER_URL), the SigV4 Region (`--region`, else the Function URL's own,
 * else AWS_REGION / AWS_DEFAULT_REGION; `local` for the local broker) and the credentials: the access key in
 * the environment when there is one, else the AWS SDK's default chain (profile, SSO, container, instance).
 */
export async function resolveBrokerTarget(
  command: string,
  io: CliIo,
  options: { url?: string | undefined; stage?: string | undefined; region?: string | undefined },
): Promise<BrokerTarget> {
  const raw = options.url ?? (await stageUrl(command, io, options)) ?? io.env.TOKEN_BROKER_URL;
  if (!raw) throw new UsageError('no broker URL: give --url or --stage, or set TOKEN_BROKER_URL', command);
  let url: string;
  try {
    url = parseVendorBaseUrl(raw);
  } catch {
    throw new UsageError(
      'the broker URL must be an https:// URL (http:// only for a local broker on 127.0.0.1), without credentials or query',
      command,
    );
  }
  let region: string;
  try {
    region = resolveRegion(options.region, url, io.env);
  } catch (error) {
    throw new UsageError(`${(error as Error).message} (give --region)`, command);
  }
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey } = io.env;
  const fromEnv: AwsCredentialIdentity | undefined =
    accessKeyId && secretAccessKey
      ? {
          accessKeyId,
          secretAccessKey,
          ...(io.env.AWS_SESSION_TOKEN ? { sessionToken: io.env.AWS_SESSION_TOKEN } : {}),
        }
      : undefined;
  return { url, region, credentials: resolveCredentials(fromEnv) };
}
