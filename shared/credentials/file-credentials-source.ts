import { readFile } from 'node:fs/promises';
import {
  type CredentialsRead,
  type CredentialsSource,
  CredentialsUnavailableError,
  contentVersionId,
  parseCredentials,
} from './credentials-source.js';

/**
 * Local mode: a JSON file {"<secretId>": {"username": ..., "password": ...}}, read again on every call so an
 * edited password is seen at once, like a new secret version. The version id is a hash of the entry.
 */
export class FileCredentialsSource implements CredentialsSource {
  readonly #path: string;

  constructor(options: { path: string }) {
    this.#path = options.path;
  }

  async read(secretId: string): Promise<CredentialsRead> {
    let file: unknown;
    try {
      file = JSON.parse(await readFile(this.#path, 'utf8'));
    } catch (error) {
      const reason =
        error instanceof SyntaxError
          ? 'not valid JSON'
          : ((error as NodeJS.ErrnoException).code ?? 'unreadable');
      // No cause: a JSON SyntaxError can quote the file's text, which holds passwords.
      throw new CredentialsUnavailableError(`credentials file ${this.#path}: ${reason}`);
    }
    if (typeof file !== 'object' || file === null || !Object.hasOwn(file, secretId)) {
      throw new CredentialsUnavailableError(`credentials file ${this.#path} has no entry "${secretId}"`);
    }
    const text = JSON.stringify((file as Record<string, unknown>)[secretId]);
    const versionId = contentVersionId(text);
    return { credentials: parseCredentials(secretId, versionId, text), versionId };
  }
}
