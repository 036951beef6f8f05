import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import type { DynamoRateLedgerOptions, RateLedger } from '../../shared/ledger/index.js';
import * as currentLedger from '../../shared/ledger/index.js';

/**
 * Release N-1's ledger beside the current one, in the same process: a canary of the next release and a
 * rollback to the last one both leave two releases writing the same ledger items. The previous release is named
 * once, in test/previous-release.json; its `shared/` tree is taken from git into a gitignored folder inside the
 * repository (test/.previous-release/<sha>/), so that vitest transforms its TypeScript like ours and its
 * imports resolve to the repository's node_modules.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PIN = path.join(ROOT, 'test/previous-release.json');
const CACHE = path.join(ROOT, 'test/.previous-release');

type ErrorClass = abstract new (...args: never[]) => Error;

/** One release's ledger, as the harness drives it: the parts both releases share. */
export interface LedgerRelease {
  /** 'current', or 'N-1 (<short sha>)'. */
  name: string;
  DynamoRateLedger: new (options: DynamoRateLedgerOptions) => RateLedger;
  LedgerUnavailableError: ErrorClass;
  ReceiptRejectedError: ErrorClass;
  /** Rate-limit settings as this release parses them (its own schema, defaults and checks). */
  parseLimits(raw: unknown): RateLimitSettings;
}

export const currentRelease: LedgerRelease = {
  name: 'current',
  DynamoRateLedger: currentLedger.DynamoRateLedger,
  LedgerUnavailableError: currentLedger.LedgerUnavailableError,
  ReceiptRejectedError: currentLedger.ReceiptRejectedError,
  parseLimits: (raw) => rateLimitSettingsSchema.parse(raw),
};

/** The commit test/previous-release.json names, checked to be a full sha. */
export function previousReleaseCommit(): string {
  const pinned = JSON.parse(readFileSync(PIN, 'utf8')) as { commit?: unknown };
  if (typeof pinned.commit !== 'string' || !/^[0-9a-f]{40}$/.test(pinned.commit))
    throw new Error(`${path.relative(ROOT, PIN)}: "commit" must be a full 40-character sha`);
  return pinned.commit;
}

function git(args: string[], input?: Buffer): { ok: boolean; stdout: Buffer; stderr: string } {
  const result = spawnSync('git', args, { cwd: ROOT, input, maxBuffer: 64 * 1024 * 1024 });
  if (result.error) throw new Error(`git could not be run: ${result.error.message}`);
  return { ok: result.status === 0, stdout: result.stdout, stderr: result.stderr.toString() };
}

/**
 * Extracts the commit's `shared/` tree once per sha and returns its folder. Safe when several test files or
 * workers do it at once: each extracts into a temporary folder beside the target and renames it into place;
 * the first rename wins, the others find the target there and drop theirs. A commit this clone lacks (a shallow
 * clone) fails, saying how to fetch it: the check is never skipped.
 */
export function extractPreviousRelease(sha = previousReleaseCommit()): {
  dir: string;
  extractedInMs?: number;
} {
  const dir = path.join(CACHE, sha);
  if (existsSync(dir)) return { dir };
  const started = performance.now();
  if (!git(['rev-parse', '--git-dir']).ok)
    throw new Error(
      `release N-1 (${sha}, test/previous-release.json) is taken from git, but ${ROOT} is not a git checkout: ` +
        'run the tests in a clone of the repository',
    );
  if (!git(['cat-file', '-e', `${sha}^{commit}`]).ok) {
    const shallow = git(['rev-parse', '--is-shallow-repository']).stdout.toString().trim() === 'true';
    throw new Error(
      `release N-1 (${sha}, test/previous-release.json) is not in this clone${shallow ? ' (a shallow clone)' : ''}: ` +
        `fetch it with \`git fetch --unshallow\` or \`git fetch origin ${sha}\`, then run the tests again`,
    );
  }
  const archive = git(['archive', '--format=tar', sha, 'shared']);
  if (!archive.ok) throw new Error(`git archive ${sha} shared failed: ${archive.stderr}`);
  mkdirSync(CACHE, { recursive: true });
  const temporary = mkdtempSync(path.join(CACHE, `.${sha.slice(0, 12)}-`));
  try {
    const tar = spawnSync('tar', ['-x', '-C', temporary], { input: archive.stdout });
    if (tar.error || tar.status !== 0)
      throw new Error(`tar could not extract release N-1: ${tar.error?.message ?? tar.stderr.toString()}`);
    // mkdtemp makes it private; the tree is the repository's own.
    chmodSync(temporary, 0o755);
    try {
      renameSync(temporary, dir);
    } catch (error) {
      // Another worker renamed its copy into place first: the same tree, so use it.
      if (!existsSync(dir)) throw error;
    }
  } finally {
    rmSync(temporary, { recursive: true, force: true });
  }
  return { dir, extractedInMs: Math.round(performance.now() - started) };
}

/**
 * One module of a release's `shared/` tree, loaded from its extracted tree (vitest transforms it like ours): the
 * parts beyond the ledger a rehearsal runs as that release (its token store, refresher, vendor client, lease
 * renewer and lease store). `file`: the module's path from the repository root, e.g. `shared/regions/renewer.ts`;
 * `commit`: as for previousRelease. What it exports is that release's, so `T` is the caller's claim about it.
 */
export async function previousReleaseModule<T>(file: string, commit = previousReleaseCommit()): Promise<T> {
  if (!/^shared\/[\w/-]+\.ts$/.test(file)) throw new Error(`not a module of shared/: ${file}`);
  const { dir } = extractPreviousRelease(commit);
  return (await import(pathToFileURL(path.join(dir, file)).href)) as T;
}

/**
 * Release N-1's ledger and settings schema, loaded from its extracted tree (vitest transforms it); `commit`: another
 * release's (a full sha), e.g. the one a change's brief names as N-1.
 */
export async function previousRelease(
  commit = previousReleaseCommit(),
): Promise<LedgerRelease & { commit: string; extractedInMs?: number }> {
  const { dir, extractedInMs } = extractPreviousRelease(commit);
  const load = (file: string) => import(pathToFileURL(path.join(dir, file)).href);
  const ledger = (await load('shared/ledger/index.ts')) as typeof currentLedger;
  const config = (await load('shared/config/credential-sets.ts')) as {
    rateLimitSettingsSchema: typeof rateLimitSettingsSchema;
  };
  return {
    name: `N-1 (${commit.slice(0, 7)})`,
    commit,
    ...(extractedInMs === undefined ? {} : { extractedInMs }),
    DynamoRateLedger: ledger.DynamoRateLedger,
    LedgerUnavailableError: ledger.LedgerUnavailableError,
    ReceiptRejectedError: ledger.ReceiptRejectedError,
    parseLimits: (raw) => config.rateLimitSettingsSchema.parse(raw),
  };
}
