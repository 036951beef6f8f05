import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Stack traces through the bundle's source map, read the first time a stack is formatted rather than as the
 * bundle loads. `--enable-source-maps` reads, parses and indexes the whole map (~0.9 MB) at every cold start,
 * 13-20 ms on the build machine, though most containers never format a stack; here a container pays that once,
 * with its first error. Each frame in a file with a map beside it (`index.js.map`) gets the original source's
 * file, line and column (resolved against the map's location, as Node does); the formatting stays whoever's it
 * was (Node's default, or a test runner's); other frames are left alone.
 *
 * Installed by each function's entry module, first. Steps aside when Node maps stacks itself
 * (`--enable-source-maps`, tsx).
 */
export function installSourceMappedStacks(): boolean {
  if (process.sourceMapsEnabled) return false;
  const format = Error.prepareStackTrace;
  Error.prepareStackTrace = (error, trace) => {
    // A frame that cannot be mapped stays as it is: formatting a stack must never throw.
    const sites = trace.map((site) => {
      try {
        return mappedSite(site);
      } catch {
        return site;
      }
    });
    return format
      ? format(error, sites)
      : [header(error), ...sites.map((site) => `    at ${site}`)].join('\n');
  };
  return true;
}

const maps = new Map<string, SourceMap | null>();

/** The map beside a file (`index.js.map`), parsed once; null when there is none or it cannot be read. */
function sourceMapOf(file: string): SourceMap | null {
  let map = maps.get(file);
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')));
    } catch {
      map = null;
    }
    maps.set(file, map);
  }
  return map;
}

/** A call site whose position is the original source's, when its file has a map; else the site itself. */
function mappedSite(site: NodeJS.CallSite): NodeJS.CallSite {
  const file = site.getFileName();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (!file?.startsWith('/') || line === null || column === null) return site;
  const entry = sourceMapOf(file)?.findEntry(line - 1, column - 1);
  if (!entry || !('originalSource' in entry)) return site;
  const source = entry.originalSource.startsWith('file:')
    ? fileURLToPath(entry.originalSource)
    : fileURLToPath(new URL(entry.originalSource, pathToFileURL(`${file}.map`)));
  const text = site
    .toString()
    .replace(`${file}:${line}:${column}`, `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`);
  // CallSite methods check their receiver: the wrapper calls them on the site.
  const wrapper: Record<string, unknown> = {};
  const methods = site as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(site))) {
    if (name !== 'constructor' && typeof methods[name] === 'function')
      wrapper[name] = methods[name].bind(site);
  }
  Object.assign(wrapper, {
    getFileName: () => source,
    getScriptNameOrSourceURL: () => source,
    getLineNumber: () => entry.originalLine + 1,
    getColumnNumber: () => entry.originalColumn + 1,
    toString: () => text,
  });
  return wrapper as unknown as NodeJS.CallSite;
}

/** V8's first line of a stack: `Name: message`, or what the thrown value says of itself. */
function header(error: unknown): string {
  try {
    return error instanceof Error ? Error.prototype.toString.call(error) : String(error);
  } catch {
    return '<error>';
  }
}
