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

/** The environment's credentials (Lambda sets them for its role; so may a shell), as the AWS SDK reads them. */
export function credentialsFromEnvironment(env: NodeJS.ProcessEnv): AwsCredentialIdentity | undefined {
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey } = env;
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = env.AWS_SESSION_TOKEN || undefined;
  return sessionToken ? { accessKeyId, secretAccessKey, sessionToken } : { accessKeyId, secretAccessKey };
}

/**
 * The AWS SDK's default chain, loaded by name (so a bundle does not see it): an optional peer dependency of the
 * client package, a dependency of the CLI's (packaging/build.ts declares both from this name).
 */
export const DEFAULT_CHAIN = '@aws-sdk/credential-provider-node';

/**
 * The credentials to sign with: the ones given; else the environment's (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN: what Lambda gives a function), read at each signing like the SDK's
 * own environment provider; else the AWS SDK's default chain (SSO, web identity, shared files, container and
 * instance metadata), loaded only when first needed and memoised by the SDK (refreshed before they expire).
 *
 * The chain is an optional peer dependency of the package: it is most of an SDK (about 20 packages, 8 MB), which
 * a service on the AWS SDK already has, and Lambda's Node.js runtime too. Without it, and without credentials
 * given or in the environment, signing fails with a ConfigurationError saying what to install.
 */
export function resolveCredentials(
  given: AwsCredentialIdentity | CredentialsProvider | undefined,
  env: NodeJS.ProcessEnv = process.env,
): AwsCredentialIdentity | CredentialsProvider {
  if (given !== undefined) {
    if (typeof given !== 'function' && (!given.accessKeyId || !given.secretAccessKey)) {
      throw new ConfigurationError('credentials: accessKeyId and secretAccessKey are required');
    }
    return given;
  }
  let chain: CredentialsProvider | undefined;
  return async () => {
    const fromEnvironment = credentialsFromEnvironment(env);
    if (fromEnvironment) return fromEnvironment;
    if (!chain) {
      let module: { defaultProvider: () => CredentialsProvider };
      try {
        module = await import(DEFAULT_CHAIN);
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
        throw new ConfigurationError(
          `credentials: none given, none in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, and the AWS SDK's default chain is not installed (npm install ${DEFAULT_CHAIN}, or pass credentials)`,
        );
      }
      chain = module.defaultProvider();
    }
    return chain();
  };
}
