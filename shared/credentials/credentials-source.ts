import { createHash } from 'node:crypto';
import * as z from 'zod';
import { BrokerError } from '../errors.js';
import { lazy } from '../lazy.js';
import type { VendorCredentials } from '../vendor-client/types.js';

/** The credentials of one set and the version of the secret they came from. */
export interface CredentialsRead {
  credentials: VendorCredentials;
  /** Changes whenever the secret's value changes: after a rejected login, a new version is worth a try at once. */
  versionId: string;
}

/** Where the refresher finds a set's username and password: Secrets Manager in AWS, a file in local mode. */
export interface CredentialsSource {
  read(secretId: string): Promise<CredentialsRead>;
}

/** The secret could not be read (missing, access denied, service down). Worth trying again later. */
export class CredentialsUnavailableError extends BrokerError {
  readonly code = 'CREDENTIALS_UNAVAILABLE';
}

/** The secret was read but is not {"username": ..., "password": ...}. Only a new version can fix it. */
export class CredentialsMalformedError extends BrokerError {
  readonly code = 'CREDENTIALS_MALFORMED';
  readonly versionId: string;

  constructor(message: string, versionId: string) {
    super(message);
    this.versionId = versionId;
  }
}

/** Built by the first login, not at cold start. */
const secretValueSchema = lazy(() => z.object({ username: z.string().min(1), password: z.string().min(1) }));

/**
 * Parses a secret's text. The error names the secret and the wrong fields, never the value: zod's messages
 * here describe types and presence only, and the cause (which could quote the text) is not kept.
 */
export function parseCredentials(secretId: string, versionId: string, text: string): VendorCredentials {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CredentialsMalformedError(`secret "${secretId}" is not JSON`, versionId);
  }
  const result = secretValueSchema().safeParse(value);
  if (!result.success) {
    const fields = [...new Set(result.error.issues.map((issue) => issue.path.join('.') || '(root)'))];
    throw new CredentialsMalformedError(
      `secret "${secretId}" must be {"username": string, "password": string}; wrong: ${fields.join(', ')}`,
      versionId,
    );
  }
  return { username: result.data.username, password: result.data.password };
}

/** A version id for sources that have none: a hash of the value, so any change gives a new one. */
export function contentVersionId(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
}
