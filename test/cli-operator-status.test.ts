import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../shared/clock.js';
import { type CliBroker, ONCALL, runIn, SANDBOX_PASSWORDS, startCliBroker } from './support/cli-harness.js';

/**
 * `token-broker status` as an operator principal (the committed local configuration's `oncall` caller: an
 * operator of every set, a consumer of none), in process against the local broker over SigV4.
 */
let b: CliBroker;
let clock: ManualClock;
const asOncall = (argv: string[]) => runIn(argv, { env: { ...b.env, ...ONCALL }, clock });

beforeAll(async () => {
  b = await startCliBroker();
  clock = b.clock as ManualClock;
  await b.broker.refreshNow();
});
afterAll(async () => {
  await b?.close();
});

describe('token-broker status as an operator', () => {
  it('shows every set of the broker, with no token anywhere in the output', async () => {
    const run = await asOncall(['status']);
    expect(run.exit, run.stderr).toBe(0);
    const rows = run.stdout.trim().split('\n').slice(1);
    expect(rows.map((line) => line.split(/\s+/).slice(0, 3))).toEqual([
      ['uat-advisor', 'uat', 'HEALTHY'],
      ['uat-execution', 'uat', 'HEALTHY'],
      ['prod-advisor', 'prod', 'HEALTHY'],
      ['prod-execution', 'prod', 'HEALTHY'],
    ]);
    const json = JSON.parse((await asOncall(['status', 'prod-execution', '--json'])).stdout);
    expect(json.credentialSets.map((s: { id: string; state: string }) => [s.id, s.state])).toEqual([
      ['prod-execution', 'HEALTHY'],
    ]);
    for (const password of SANDBOX_PASSWORDS) expect(run.stdout + run.stderr).not.toContain(password);
    expect(run.stdout + run.stderr).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
  });

  it('gets no token: `token` exits 1 with INSUFFICIENT_PERMISSIONS and prints nothing on stdout', async () => {
    const run = await asOncall(['token', 'uat-advisor']);
    expect(run.exit).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/error INSUFFICIENT_PERMISSIONS: .*status only/);
  });
});
