/**
 * Run by test/permit-path.test.ts in a plain Node process (tsx, as `npm start` runs: no test runner's module
 * shims): starts the vend API on dynalite and the sandbox, makes one warm POST permits, and prints as JSON the
 * project's files (shared/, functions/) that had a function run during that request, by V8's precise coverage.
 */
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { startDynaliteServer } from './dynalite.js';
import { fixture, parseBody, startVendHarness, withChanges } from './vend-harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const dynamo = await startDynaliteServer();
const h = await startVendHarness(dynamo);
try {
  const tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
  const acquire = () => h.invoke(withChanges(fixture('acquire-permits'), { body: { tokenId, count: 1 } }));
  const warm = await acquire();
  if (warm.statusCode !== 200) throw new Error(`warm-up permit: ${warm.statusCode}`);
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await session.post('Profiler.takePreciseCoverage');
  const permit = await acquire();
  const { result } = await session.post('Profiler.takePreciseCoverage');
  session.disconnect();
  if (permit.statusCode !== 200) throw new Error(`permit: ${permit.statusCode}`);
  const files = new Set<string>();
  for (const script of result) {
    if (!script.url.startsWith('file:')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(ROOT)) continue;
    const relative = path.slice(ROOT.length);
    if (!/^(shared|functions)\//.test(relative)) continue;
    if (script.functions.some((fn) => (fn.ranges[0]?.count ?? 0) > 0)) files.add(relative);
  }
  process.stdout.write(`${JSON.stringify([...files].sort())}\n`);
} finally {
  await h.close();
  await dynamo.close();
}
