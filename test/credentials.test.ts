import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CredentialsMalformedError,
  CredentialsUnavailableError,
  FileCredentialsSource,
} from '../shared/credentials/index.js';
import { fakeSecretsManager } from './support/refresher-harness.js';

const PASSWORD = 'pw-that-must-never-show-9f1c';
const everything = (error: unknown) =>
  `${String(error)} ${JSON.stringify(error)} ${inspect(error, { depth: 5 })} ${(error as Error).message}`;

describe('SecretsManagerCredentialsSource', () => {
  it('returns the credentials and the secret version, reading again on every call', async () => {
    const secrets = fakeSecretsManager();
    const v1 = secrets.put('token-broker/prod-advisor', { username: 'prod-advisor', password: PASSWORD });
    expect(await secrets.source.read('token-broker/prod-advisor')).toEqual({
      credentials: { username: 'prod-advisor', password: PASSWORD },
      versionId: v1,
    });
    const v2 = secrets.put('token-broker/prod-advisor', { username: 'prod-advisor', password: 'rotated' });
    expect(v2).not.toBe(v1);
    expect((await secrets.source.read('token-broker/prod-advisor')).versionId).toBe(v2);
    expect(secrets.mock.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input.SecretId)).toEqual([
      'token-broker/prod-advisor',
      'token-broker/prod-advisor',
    ]);
  });

  it('says a missing secret is unavailable, naming it', async () => {
    const secrets = fakeSecretsManager();
    const error = await secrets.source.read('token-broker/absent').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialsUnavailableError);
    expect(error).toMatchObject({ code: 'CREDENTIALS_UNAVAILABLE' });
    expect((error as Error).message).toBe(
      'secret "token-broker/absent" could not be read: ResourceNotFoundException',
    );
  });

  it.each([
    ['not JSON', `{"username": "u", "password": "${PASSWORD}"`, 'is not JSON'],
    ['without a password', JSON.stringify({ username: 'u', pass: PASSWORD }), 'wrong: password'],
    ['with a number for a password', JSON.stringify({ username: 'u', password: 12345 }), 'wrong: password'],
    ['a bare string', JSON.stringify(PASSWORD), 'wrong: (root)'],
  ])(
    'refuses a secret %s with a message that names the problem, never the value',
    async (_case, text, expected) => {
      const secrets = fakeSecretsManager();
      const versionId = secrets.put('s', text);
      const error = await secrets.source.read('s').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CredentialsMalformedError);
      expect(error).toMatchObject({ code: 'CREDENTIALS_MALFORMED', versionId });
      expect((error as Error).message).toContain(expected);
      expect(everything(error)).not.toContain(PASSWORD);
      expect(everything(error)).not.toContain('12345');
    },
  );
});

describe('FileCredentialsSource', () => {
  let dir: string;
  let path: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'credentials-'));
    path = join(dir, 'credentials.json');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const write = (value: unknown) =>
    writeFile(path, typeof value === 'string' ? value : JSON.stringify(value));

  it('reads an entry, with a version that changes only when that entry changes', async () => {
    await write({ a: { username: 'ua', password: PASSWORD }, b: { username: 'ub', password: 'pb' } });
    const source = new FileCredentialsSource({ path });
    const first = await source.read('a');
    expect(first.credentials).toEqual({ username: 'ua', password: PASSWORD });
    await write({ a: { username: 'ua', password: PASSWORD }, b: { username: 'ub', password: 'changed' } });
    expect((await source.read('a')).versionId).toBe(first.versionId);
    await write({ a: { username: 'ua', password: 'rotated' }, b: { username: 'ub', password: 'changed' } });
    const rotated = await source.read('a');
    expect(rotated.credentials.password).toBe('rotated');
    expect(rotated.versionId).not.toBe(first.versionId);
    expect(first.versionId).not.toContain(PASSWORD);
  });

  it('says what is wrong with the file without quoting it', async () => {
    const source = new FileCredentialsSource({ path });
    await write({ a: { username: 'ua', password: PASSWORD } });
    await expect(source.read('zz')).rejects.toThrow(`credentials file ${path} has no entry "zz"`);
    await write(`{"a": {"username": "ua", "password": "${PASSWORD}"`);
    const broken = await source.read('a').catch((e: unknown) => e);
    expect(broken).toBeInstanceOf(CredentialsUnavailableError);
    expect(everything(broken)).not.toContain(PASSWORD);
    await write({ a: { username: 'ua' } });
    await expect(source.read('a')).rejects.toBeInstanceOf(CredentialsMalformedError);
    const absent = new FileCredentialsSource({ path: join(dir, 'absent.json') });
    await expect(absent.read('a')).rejects.toThrow('ENOENT');
  });
});
