import {
  CreateSecretCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import type { VendorCredentials } from '../shared/vendor/types.js';
import { SecretWriteError } from './errors.js';

export interface SecretWrite {
  secretId: string;
  versionId: string | undefined;
  created: boolean;
}

/** An SDK failure as a SecretWriteError named by the service's error; never the request (it holds the password). */
function translate(error: unknown, secretId: string): SecretWriteError {
  if (error instanceof SecretsManagerServiceException) {
    const detail = (error.message || '').slice(0, 300);
    return new SecretWriteError(error.name, `Secrets Manager refused to write "${secretId}": ${detail}`, {
      cause: error,
    });
  }
  const name = error instanceof Error ? error.name : typeof error;
  if (name === 'CredentialsProviderError') {
    return new SecretWriteError(name, 'no AWS credentials found (environment, profile, SSO or role)', {
      cause: error,
    });
  }
  return new SecretWriteError('NETWORK_ERROR', `Secrets Manager could not be reached (${name})`, {
    cause: error,
  });
}

/**
 * Writes {"username", "password"} as a new version of the secret (the refresher sees the new VersionId at its
 * next run and logs in at once after a rejection). A missing secret is created only when asked to: the stack
 * references secrets by name and a typo should not silently create a second one.
 */
export async function writeCredentials(
  client: SecretsManagerClient,
  request: { secretId: string; setId: string; credentials: VendorCredentials; create: boolean },
): Promise<SecretWrite> {
  const secretString = JSON.stringify({
    username: request.credentials.username,
    password: request.credentials.password,
  });
  try {
    const output = await client.send(
      new PutSecretValueCommand({ SecretId: request.secretId, SecretString: secretString }),
    );
    return { secretId: request.secretId, versionId: output.VersionId, created: false };
  } catch (error) {
    const failure = translate(error, request.secretId);
    if (failure.code !== 'ResourceNotFoundException') throw failure;
    if (!request.create) {
      throw new SecretWriteError(
        failure.code,
        `secret "${request.secretId}" does not exist; add --create to create it (the stack only references it)`,
        { cause: error },
      );
    }
  }
  if (request.secretId.startsWith('arn:')) {
    throw new SecretWriteError('InvalidParameterException', '--create needs a secret name, not an ARN');
  }
  try {
    const output = await client.send(
      new CreateSecretCommand({
        Name: request.secretId,
        SecretString: secretString,
        Description: `token-broker: vendor credentials of credential set ${request.setId}`,
      }),
    );
    return { secretId: request.secretId, versionId: output.VersionId, created: true };
  } catch (error) {
    throw translate(error, request.secretId);
  }
}
