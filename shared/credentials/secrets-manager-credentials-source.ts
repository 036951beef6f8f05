import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  type CredentialsRead,
  type CredentialsSource,
  CredentialsUnavailableError,
  contentVersionId,
  parseCredentials,
} from './credentials-source.js';

/**
 * Reads {"username", "password"} from Secrets Manager (AWSCURRENT) on every call: after a rejected login the
 * refresher must see a rotated password at once, so nothing is cached here. The VersionId comes with the value.
 */
export class SecretsManagerCredentialsSource implements CredentialsSource {
  readonly #client: SecretsManagerClient;

  constructor(options: { client: SecretsManagerClient }) {
    this.#client = options.client;
  }

  async read(secretId: string): Promise<CredentialsRead> {
    let output: { SecretString?: string; SecretBinary?: Uint8Array; VersionId?: string };
    try {
      output = await this.#client.send(new GetSecretValueCommand({ SecretId: secretId }));
    } catch (error) {
      // The SDK's error names the secret and the reason (ResourceNotFound, AccessDenied); never a value.
      const reason = error instanceof Error ? error.name : 'unknown error';
      throw new CredentialsUnavailableError(`secret "${secretId}" could not be read: ${reason}`, {
        cause: error,
      });
    }
    const text =
      output.SecretString ??
      (output.SecretBinary ? Buffer.from(output.SecretBinary).toString('utf8') : undefined);
    if (text === undefined) {
      throw new CredentialsUnavailableError(`secret "${secretId}" has no value`);
    }
    const versionId = output.VersionId ?? contentVersionId(text);
    return { credentials: parseCredentials(secretId, versionId, text), versionId };
  }
}
