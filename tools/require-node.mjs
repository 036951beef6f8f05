// Running from source needs the Lambda runtime's Node major (.nvmrc; package.json's engines and its `node`
// devDependency say the same): `npm start`, `npm test` and bin/token-broker.mjs load this first. On another major
// it stops at once with one line that says what to do, instead of a stack trace from deep inside vitest or tsx.
// Plain JavaScript with nothing imported but node:fs, so that it runs on any Node that can say so. The packaged CLI
// (packaging/build.ts) does not load it: it runs on Node 20 and newer.
import { readFileSync } from 'node:fs';

const needed = readFileSync(new URL('../.nvmrc', import.meta.url), 'utf8').trim();
const running = process.versions.node;
if (running.split('.')[0] !== needed) {
  process.stderr.write(
    `token-broker needs Node ${needed} (the Lambda runtime's major); this is Node ${running}. Run "npm ci" (it installs Node ${needed} as a devDependency; "npm ci --ignore-scripts" skips it), or "nvm use" (.nvmrc).\n`,
  );
  process.exit(1);
}
