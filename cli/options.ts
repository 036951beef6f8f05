import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { closestKey } from '../shared/config/unknown-keys.js';
import { UsageError } from './errors.js';

/** Options every command takes. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;
export const BROKER_OPTIONS = {
  url: { type: 'string' },
  stage: { type: 'string' },
  region: { type: 'string' },
} as const;

/**
 * Parses one command's arguments. Wrong ones become a UsageError that names the option, never a value: an
 * operator who types a password as an argument by mistake must not see it echoed into a terminal log.
 */
export function parseCommandLine<T extends ParseArgsOptionsConfig>(
  command: string,
  args: string[],
  options: T,
  positionals: { min: number; max: number; what: string },
) {
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; options: T; allowPositionals: true; strict: true }>
  >;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(describeParseError(error, options), command);
  }
  const values = parsed.values as Record<string, unknown>;
  if (values.help === true) return { help: true as const, values: parsed.values, positionals: [] };
  const count = parsed.positionals.length;
  if (count < positionals.min) throw new UsageError(`missing ${positionals.what}`, command);
  if (count > positionals.max) {
    throw new UsageError(
      `too many arguments: expected ${positionals.max === 0 ? 'none' : positionals.what}, got ${count}`,
      command,
    );
  }
  return { help: false as const, values: parsed.values, positionals: parsed.positionals };
}

function describeParseError(error: unknown, options: ParseArgsOptionsConfig): string {
  const code = (error as { code?: string }).code;
  const message = error instanceof Error ? error.message : '';
  const named = /'(-{1,2}[A-Za-z0-9-]*)/.exec(message)?.[1] ?? 'an option';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const known = Object.keys(options);
    // Only a long option is compared, without its dashes: a one-letter one is near every other.
    const meant = named.startsWith('--') ? closestKey(named.slice(2), known) : undefined;
    return meant
      ? `unknown option ${named}; did you mean --${meant}?`
      : `unknown option ${named} (known: ${known.map((name) => `--${name}`).join(', ')})`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') return `option ${named} needs a value, or takes none`;
  return 'the arguments could not be read';
}

/** A whole number of seconds from an option, or a UsageError naming the option. */
export function wholeSeconds(command: string, name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value)) throw new UsageError(`--${name} must be a whole number of seconds`, command);
  return Number(value);
}
