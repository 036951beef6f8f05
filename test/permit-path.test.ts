import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The path of a permit (issue 34): the files whose code runs for one warm POST permits, from the vend handler to
 * the ledger's DynamoDB write, measured by V8's precise coverage in a plain Node process
 * (test/support/permit-path-probe.ts). The ledger's part (shared/ledger, shared/regions) stays at most 12 files, so
 * that one grant can be followed whole; docs/ledger.md lists them.
 */
const MAX_LEDGER_FILES = 12;

describe('the path of a permit', () => {
  it(`crosses at most ${MAX_LEDGER_FILES} files of shared/ledger and shared/regions`, async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'test/support/permit-path-probe.ts'],
      {
        timeout: 60_000,
      },
    );
    const files = JSON.parse(stdout) as string[];
    const ledger = files.filter((file) => /^shared\/(ledger|regions)\//.test(file));
    console.log(
      `${files.length} files on a permit's path, ${ledger.length} of them the ledger's:\n${files.join('\n')}`,
    );
    expect(files).toContain('shared/vend/vend-handler.ts');
    expect(ledger.length).toBeGreaterThan(0);
    expect(ledger.length).toBeLessThanOrEqual(MAX_LEDGER_FILES);
  });
});
