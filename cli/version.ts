import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Set by packaging/build.ts (esbuild `define`) in the built CLI: the package's version and the commit it was built
 * from. Absent from source, where the checkout itself says both.
 */
declare const TOKEN_BROKER_BUILD: { version: string; commit: string } | undefined;

/** Where the CLI was built from: the package's version and the commit (`unknown` outside git). */
export interface CliVersion {
  version: string;
  commit: string;
}

/**
 * From source: the CLI package's version (packaging/cli.package.json, the one the built package carries, not the
 * private broker package's) and `git rev-parse --short HEAD` of the checkout.
 */
function sourceVersion(): CliVersion {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const { version } = JSON.parse(readFileSync(`${root}/packaging/cli.package.json`, 'utf8')) as {
    version: string;
  };
  return { version, commit: gitCommit(root) };
}

/** The short commit of `dir`'s checkout, or `unknown` (no git, or not a checkout: a tarball, an export). */
export function gitCommit(dir: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return 'unknown';
  }
}

export function cliVersion(): CliVersion {
  return typeof TOKEN_BROKER_BUILD === 'undefined' ? sourceVersion() : TOKEN_BROKER_BUILD;
}

/** `token-broker 0.2.0 (commit 5faa6bf)`: what `--version` and `version` print. */
export const versionLine = ({ version, commit }: CliVersion): string =>
  `token-broker ${version} (commit ${commit})`;
