/**
 * Stands in for `@aws-sdk/credential-provider-node` in the functions' bundles (an esbuild alias, set in
 * infra/constructs/broker-function.ts; the sources and tests import the real one). In Lambda the SDK's default
 * chain always ends at its first link: the execution role's credentials, which Lambda puts in the environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). The rest of the chain (SSO, ini files,
 * web identity, process, container and instance metadata, with the STS and SSO clients they bring) is about
 * 130 KiB that every cold start would parse and never run; the SDK leaves trimming it to its users
 * (aws-sdk-js-v3 issue 5516).
 *
 * Same export, same shape as the real module's `defaultProvider`: a provider the SDK clients call for
 * credentials. Without those variables it fails as the real chain fails once every link is exhausted, with the
 * SDK's CredentialsProviderError, naming what is missing.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';
import type { AwsCredentialIdentityProvider } from '@smithy/types';

export const defaultProvider = (init?: Parameters<typeof fromEnv>[0]): AwsCredentialIdentityProvider =>
  fromEnv(init);
