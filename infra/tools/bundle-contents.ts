import path from 'node:path';

/**
 * What a bundle is made of, from its source map: the generated characters each mapping segment covers,
 * summed per input file and per package (`zod`, `@aws-sdk/client-dynamodb`; first-party code by folder).
 * esbuild writes ASCII (it escapes the rest), so characters are bytes. No metafile needed: the measured
 * bundle is the deployed one.
 */
export interface BundleInput {
  name: string;
  bytes: number;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DIGIT = new Map([...BASE64].map((char, index) => [char, index]));

/** The numbers of one source-map segment (base64 VLQ). */
function decodeSegment(segment: string): number[] {
  const values: number[] = [];
  let value = 0;
  let shift = 0;
  for (const char of segment) {
    const digit = DIGIT.get(char);
    if (digit === undefined) throw new Error(`not a source-map digit: ${char}`);
    value += (digit & 31) * 2 ** shift;
    if (digit & 32) {
      shift += 5;
      continue;
    }
    values.push(value & 1 ? -Math.floor(value / 2) : Math.floor(value / 2));
    value = 0;
    shift = 0;
  }
  return values;
}

/** Bytes of generated code per source file of the map (`(unmapped)`: banner, glue). */
export function bytesPerSource(
  code: string,
  map: { sources: string[]; mappings: string },
): Map<string, number> {
  const totals = new Map<string, number>();
  const add = (name: string, bytes: number) => totals.set(name, (totals.get(name) ?? 0) + bytes);
  const lines = code.split('\n');
  const mapped = map.mappings.split(';');
  let source = 0;
  lines.forEach((line, index) => {
    let column = 0;
    let owner = '(unmapped)';
    for (const segment of mapped[index]?.split(',') ?? []) {
      if (!segment) continue;
      const [columnDelta = 0, sourceDelta] = decodeSegment(segment);
      const next = column + columnDelta;
      add(owner, next - column);
      column = next;
      if (sourceDelta === undefined) owner = '(unmapped)';
      else {
        source += sourceDelta;
        owner = map.sources[source] ?? '(unmapped)';
      }
    }
    // The newline too, but the file's last line has none.
    add(owner, line.length - column + (index < lines.length - 1 ? 1 : 0));
  });
  return totals;
}

/** The package a source belongs to (the innermost node_modules), or its first-party folder. */
export function packageOf(source: string): string {
  const parts = source.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at >= 0) {
    const name = parts[at + 1] ?? '?';
    return name.startsWith('@') ? `${name}/${parts[at + 2] ?? '?'}` : name;
  }
  const own = parts.filter((part) => part !== '..' && part !== '.');
  return own.length > 1 ? `${own.slice(0, -1).slice(0, 2).join('/')}/` : (own[0] ?? source);
}

/**
 * Inputs grouped by package, largest first. Sources are relative to the map's folder (`mapDir`); first-party
 * ones are named relative to `root` (the repository).
 */
export function largestInputs(
  code: string,
  map: { sources: string[]; mappings: string },
  mapDir: string,
  root: string,
): BundleInput[] {
  const byPackage = new Map<string, number>();
  for (const [source, bytes] of bytesPerSource(code, map)) {
    const name =
      source === '(unmapped)' ? source : packageOf(path.relative(root, path.resolve(mapDir, source)));
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytes);
  }
  return [...byPackage].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

/**
 * Each function's bundle, with the zod it loads on first use from beside it, must stay under this (checked in
 * test/infra-bundle.test.ts). 400 (#25): the bundles carry only what runs in Lambda (the environment's
 * credentials, no event streams, zod in a file of its own loaded on first use; see
 * infra/constructs/broker-function.ts): vend from 553 to 302 + 97 KiB, the refresher from 523 to 277 + 97.
 * 420 (#24, #26): request classes by path, learned class limits and strict configuration with its suggestions
 * add 11 KiB to vend (313 + 97) and 5 to the refresher (282 + 97); `npm run bench -- bundles` measures what the
 * cold start costs against the yardstick. #35: the operators' forced re-login and the 503's cause add 3.9 KiB to
 * vend, paid for by SHA-256 from node:crypto alone (shared/aws/bundle/native-sha256.ts, -3.4 KiB) and shorter
 * words: vend 323.1 + 96.6 KiB, the refresher 274 + 96.6.
 */
export const BUNDLE_BUDGET_KIB = 420;

/** A table of the largest inputs of a bundle, one line each: KiB, share, package. */
export function formatInputs(inputs: readonly BundleInput[], total: number, top = 10): string[] {
  return inputs
    .slice(0, top)
    .map(
      (input) =>
        `${(input.bytes / 1024).toFixed(1).padStart(7)} KiB ${((100 * input.bytes) / total).toFixed(1).padStart(5)} %  ${input.name}`,
    );
}
