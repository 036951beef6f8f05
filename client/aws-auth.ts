import { ConfigurationError } from '../shared/errors.js';
import type { AwsCredentialIdentity, CredentialsProvider } from './sigv4.js';

const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;
/** A Lambda Function URL names its Region: https://<url-id>.lambda-url.<region>.on.aws */
const FUNCTION_URL_HOST = /^[a-z0-9]+\.lambda-url\.([a-z0-9-]+)\.on\.aws$/;

/**
 * The Region to sign for: the option, else the one in a Function URL's host name, else AWS_REGION (set in
 * Lambda, ECS, CodeBuild…), else AWS_DEFAULT_REGION. A wrong or missing Region fails here, by name.
 */
export function resolveRegion(
  explicit: string | undefined,
  brokerUrl: string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const fromUrl = FUNCTION_URL_HOST.exec(new URL(brokerUrl).hostname)?.[1];
  const region = explicit ?? fromUrl ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (region === undefined || region === '') {
    throw new ConfigurationError(
      'region: not given, not in the broker URL, and neither AWS_REGION nor AWS_DEFAULT_REGION is set',
    );
  }
  // 'local' is the local broker's Region (see local/); everything else must look like an AWS Region.
  if (region !== 'local' && !REGION.test(region))
    throw new ConfigurationError('region: not an AWS Region name');
  return region;
}

/**
 * The credentials to sign with: the ones given, else the AWS SDK's default chain (environment, SSO, web
 * identity, shared files, container and instance metadata), loaded only when first needed and memoised by the
 * SDK (refreshed before they expire).
 */
export function resolveCredentials(
  given: AwsCredentialIdentity | CredentialsProvider | undefined,
): AwsCredentialIdentity | CredentialsProvider {
  if (given !== undefined) {
    if (typeof given !== 'function' && (!given.accessKeyId || !given.secretAccessKey)) {
      throw new ConfigurationError('credentials: accessKeyId and secretAccessKey are required');
    }
    return given;
  }
  let chain: CredentialsProvider | undefined;
  return async () => {
    if (!chain) {
      const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
      chain = defaultProvider();
    }
    return chain();
  };
}
