import {
  CreateSecretCommand,
  PutResourcePolicyCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import { type PolicyDocument, policyText } from '../infra/secret-policy.js';
import type { VendorCredentials } from '../shared/vendor-client/types.js';
import { SecretWriteError } from './errors.js';

export interface SecretWrite {
  secretId: string;
  versionId: string | undefined;
  created: boolean;
  /** The resource policy was put (before the value). */
  policyPut: boolean;
}

/** An SDK failure as a SecretWriteError named by the service's error; never the request (it holds the password). */
function translate(error: unknown, secretId: string, what = 'write'): SecretWriteError {
  if (error instanceof SecretsManagerServiceException) {
    const detail = (error.message || '').slice(0, 300);
    return new SecretWriteError(error.name, `Secrets Manager refused to ${what} "${secretId}": ${detail}`, {
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
 *
 * With a `policy` (a stage's secret), the resource policy is put first, at every write, and only then the
 * value: a new secret is created without a value, given its policy, then its value, so the value is never
 * stored, even for a moment, in a secret that others may read; an existing secret gets its policy back
 * before a new value if someone removed or changed it. A policy that cannot be put stops the write.
 */
export async function writeCredentials(
  client: SecretsManagerClient,
  request: {
    secretId: string;
    setId: string;
    credentials: VendorCredentials;
    create: boolean;
    policy?: PolicyDocument;
  },
): Promise<SecretWrite> {
  const secretString = JSON.stringify({
    username: request.credentials.username,
    password: request.credentials.password,
  });
  let created = false;
  if (request.policy) {
    const policy = request.policy;
    const putPolicy = () =>
      client.send(
        new PutResourcePolicyCommand({
          SecretId: request.secretId,
          ResourcePolicy: policyText(policy),
          BlockPublicPolicy: true,
        }),
      );
    try {
      await putPolicy();
    } catch (error) {
      const failure = translate(error, request.secretId, 'put the resource policy on');
      if (failure.code !== 'ResourceNotFoundException') throw failure;
      await createWithoutValue(client, request, error);
      created = true;
      try {
        await putPolicy();
      } catch (afterCreate) {
        const refused = translate(afterCreate, request.secretId, 'put the resource policy on');
        throw new SecretWriteError(
          refused.code,
          `${refused.message} — the secret was created without a value and no value was written; run put-credentials again (without --create) once the policy can be put`,
          { cause: afterCreate },
        );
      }
    }
  }
  const putValue = async () =>
    (await client.send(new PutSecretValueCommand({ SecretId: request.secretId, SecretString: secretString })))
      ?.VersionId;
  const written = (versionId: string | undefined): SecretWrite => ({
    secretId: request.secretId,
    versionId,
    created,
    policyPut: request.policy !== undefined,
  });
  try {
    return written(await putValue());
  } catch (error) {
    const failure = translate(error, request.secretId);
    // Without a policy the value is the first call: a missing secret shows here.
    if (failure.code !== 'ResourceNotFoundException' || created || request.policy) throw failure;
    await createWithoutValue(client, request, error);
    created = true;
  }
  try {
    return written(await putValue());
  } catch (error) {
    throw translate(error, request.secretId);
  }
}

/** CreateSecret with no value (a secret without versions), when --create allows it. */
async function createWithoutValue(
  client: SecretsManagerClient,
  request: { secretId: string; setId: string; create: boolean },
  notFound: unknown,
): Promise<void> {
  if (!request.create) {
    throw new SecretWriteError(
      'ResourceNotFoundException',
      `secret "${request.secretId}" does not exist; add --create to create it (the stack only references it)`,
      { cause: notFound },
    );
  }
  if (request.secretId.startsWith('arn:')) {
    throw new SecretWriteError('InvalidParameterException', '--create needs a secret name, not an ARN');
  }
  try {
    await client.send(
      new CreateSecretCommand({
        Name: request.secretId,
        Description: `token-broker: vendor credentials of credential set ${request.setId}`,
      }),
    );
  } catch (error) {
    throw translate(error, request.secretId, 'create');
  }
}
