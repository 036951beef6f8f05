import * as z from 'zod';
import type { VendorCredentials } from '../shared/vendor-client/types.js';
import { PromptCancelledError, UsageError } from './errors.js';
import type { CliInput } from './io.js';

const MAX_INPUT_BYTES = 64 * 1024;
const COMMAND = 'put-credentials';

const credentialsSchema = z.strictObject({
  username: z.string().min(1).max(256),
  password: z.string().min(1).max(4096),
});

/** Checks what was read; the messages name what is wrong, never a value. */
function checked(value: unknown): VendorCredentials {
  const result = credentialsSchema.safeParse(value);
  if (!result.success) {
    const fields = [
      ...new Set(
        result.error.issues.map(
          (i) => i.path.join('.') || (i.code === 'unrecognized_keys' ? 'extra fields' : '(input)'),
        ),
      ),
    ];
    throw new UsageError(
      `the credentials must be a non-empty "username" and "password" and nothing else; wrong: ${fields.join(', ')}`,
      COMMAND,
    );
  }
  const control = [...result.data.username].some((char) => {
    const code = char.charCodeAt(0);
    return code < 0x20 || code === 0x7f;
  });
  if (control) throw new UsageError('the username contains control characters', COMMAND);
  return result.data;
}

async function readAll(stdin: CliInput): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array);
    size += buffer.length;
    if (size > MAX_INPUT_BYTES)
      throw new UsageError(`standard input is larger than ${MAX_INPUT_BYTES} bytes`, COMMAND);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Piped input: either JSON {"username", "password"} (the secret's own shape), or two lines: the username, then
 * the password. Only line ends are stripped; a password may begin or end with spaces.
 */
export function parseCredentialsText(text: string): VendorCredentials {
  if (text.trim() === '') throw new UsageError('no credentials on standard input', COMMAND);
  if (text.trimStart().startsWith('{')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      // JSON.parse's message quotes the input: it is not kept.
      throw new UsageError('standard input starts with "{" but is not valid JSON', COMMAND);
    }
    return checked(value);
  }
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== 2) {
    throw new UsageError(
      `expected two lines on standard input (the username, then the password), got ${lines.length}`,
      COMMAND,
    );
  }
  return checked({ username: lines[0], password: lines[1] });
}

/**
 * On a terminal: asks for the username (shown) and the password (not shown, not even as asterisks), in raw
 * mode so that nothing typed is echoed by the terminal. Ctrl-C or Ctrl-D cancels; backspace and Ctrl-U edit.
 */
function prompt(
  stdin: CliInput,
  stderr: { write(text: string): unknown },
  setId: string,
): Promise<VendorCredentials> {
  const setRawMode = stdin.setRawMode?.bind(stdin);
  if (!setRawMode)
    throw new UsageError('cannot hide input on this terminal; pipe the credentials instead', COMMAND);
  const fields = ['', ''];
  let current = 0;
  return new Promise<VendorCredentials>((resolve, reject) => {
    const finish = (error?: Error) => {
      stdin.removeListener('data', onData);
      setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      if (error) reject(error);
      else {
        try {
          resolve(checked({ username: fields[0], password: fields[1] }));
        } catch (invalid) {
          reject(invalid);
        }
      }
    };
    const onData = (chunk: Buffer | string) => {
      for (const char of chunk.toString()) {
        const echo = current === 0;
        if (char === '\u0003' || (char === '\u0004' && fields[current] === '')) {
          finish(new PromptCancelledError('cancelled; nothing was written'));
          return;
        }
        if (char === '\r' || char === '\n' || char === '\u0004') {
          current++;
          if (current === 2) {
            finish();
            return;
          }
          stderr.write(`\npassword (not shown): `);
        } else if (char === '\u007f' || char === '\b') {
          if (fields[current]) {
            fields[current] = (fields[current] ?? '').slice(0, -1);
            if (echo) stderr.write('\b \b');
          }
        } else if (char === '\u0015') {
          if (echo) stderr.write('\b \b'.repeat((fields[current] ?? '').length));
          fields[current] = '';
        } else if (char >= ' ') {
          fields[current] += char;
          if (echo) stderr.write(char);
        }
      }
    };
    stderr.write(`username for ${setId}: `);
    setRawMode(true);
    stdin.on('data', onData);
    stdin.resume();
  });
}

/** The set's username and password from a terminal prompt or from standard input; never from arguments. */
export async function readCredentials(
  stdin: CliInput,
  stderr: { write(text: string): unknown },
  setId: string,
): Promise<VendorCredentials> {
  if (stdin.isTTY) return prompt(stdin, stderr, setId);
  return parseCredentialsText(await readAll(stdin));
}
