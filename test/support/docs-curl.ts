import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

/**
 * The curl commands of docs/vend-api.md ("From any language: curl"): the block, as the docs have it, and the tools
 * it needs. test/docs-curl.test.ts checks what the block says and that the tools are there (`npm test`);
 * test/docs-curl-commands.test.ts runs it against `npm start` (it waits out the broker's storm guard in real
 * time: `npm run test:long`).
 */
export const run = promisify(execFile);
const DOC = 'docs/vend-api.md';
const MARKER = '<!-- checked: test/docs-curl.test.ts';
export const CALLER = {
  accessKeyId: 'AKIALOCALPORTFOLIO01',
  secretAccessKey: 'local-only-portfolio-service-secret',
};

export function documentedBlock(): { script: string; expected: number[] } {
  const doc = readFileSync(DOC, 'utf8');
  const at = doc.indexOf(MARKER);
  if (at < 0) throw new Error(`${DOC}: no block marked "${MARKER}"`);
  const block = /```sh\n([\s\S]*?)\n```/.exec(doc.slice(at));
  if (!block?.[1]) throw new Error(`${DOC}: no \`\`\`sh block after the marker`);
  const expected = [...block[1].matchAll(/# HTTP (\d{3})\b/g)].map((m) => Number(m[1]));
  return { script: block[1], expected };
}

/** The tool's version line, or a failure that says what is missing (never a skip). */
export async function tool(name: string, args: string[], why: string): Promise<string> {
  return run(name, args).then(
    ({ stdout }) => stdout.split('\n')[0] ?? '',
    () => {
      throw new Error(
        `${name} is not installed (\`${name} ${args.join(' ')}\` failed): ${why}. ` +
          `Install it: sudo apt-get install -y ${name} (.ci/run does).`,
      );
    },
  );
}
