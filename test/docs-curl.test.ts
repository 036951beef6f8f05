import { describe, expect, it } from 'vitest';
import { documentedBlock, tool } from './support/docs-curl.js';

/**
 * The curl commands of docs/vend-api.md ("From any language: curl"): the block documents the whole flow, and the
 * machine has the curl and jq it needs. Run as written against `npm start`, every status the one its `# HTTP`
 * comment says: test/docs-curl-commands.test.ts, in `npm run test:long` (it waits out the broker's storm guard in
 * real time).
 */
describe('the curl commands in docs/vend-api.md', () => {
  it('has curl 7.84 or later and jq', async () => {
    const curl = await tool('curl', ['--version'], 'the docs test runs the documented curl commands');
    const [major, minor] = (/^curl (\d+)\.(\d+)/.exec(curl) ?? []).slice(1).map(Number);
    if (!((major ?? 0) > 7 || (major === 7 && (minor ?? 0) >= 84))) {
      throw new Error(`${curl}: the documented commands need curl 7.84 or later (--aws-sigv4, %header{})`);
    }
    await tool('jq', ['--version'], 'the documented commands read the answers with jq');
  });

  it('documents the whole flow: token, permits, give-back, rate-limit report, rejection', () => {
    const { script, expected } = documentedBlock();
    expect(expected).toEqual([200, 200, 200, 204, 200]);
    for (const route of [
      '/token)',
      '/permits "',
      '/permits/returns',
      '/rate-limit-reports',
      '/token/rejections',
    ]) {
      expect(script).toContain(route);
    }
    expect(script).toContain('--aws-sigv4 "aws:amz:$AWS_REGION:lambda"');
    expect(script).toContain('--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"');
    expect(script).toContain('x-amz-security-token: $AWS_SESSION_TOKEN');
  });
});
