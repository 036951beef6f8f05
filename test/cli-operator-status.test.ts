import { describe, expect, it } from 'vitest';
import { BrokerApi } from '../client/broker-api.js';
import { FunctionUrlSigner } from '../client/sigv4.js';
import type { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { planFor } from '../shared/ledger/limit-plan.js';
import {
  type CliBroker,
  cliBrokerPerFile,
  ONCALL,
  PORTFOLIO,
  runIn,
  SANDBOX_PASSWORDS,
} from './support/cli-harness.js';

/**
 * `token-broker status` as an operator principal (the committed local configuration's `oncall` caller: an
 * operator of every set, a consumer of none), in process against the local broker over SigV4.
 */
let b: CliBroker;
let clock: ManualClock;
const asOncall = (argv: string[]) => runIn(argv, { env: { ...b.env, ...ONCALL }, clock });

cliBrokerPerFile((started) => {
  b = started;
  clock = started.clock as ManualClock;
});

describe('token-broker status as an operator', () => {
  it('shows every set of the broker, with no token anywhere in the output', async () => {
    const run = await asOncall(['status']);
    expect(run.exit, run.stderr).toBe(0);
    const rows = (run.stdout.trim().split('\n\n')[0] ?? '').split('\n').slice(1);
    expect(rows.map((line) => line.split(/\s+/).slice(0, 2))).toEqual([
      ['uat-advisor', 'HEALTHY'],
      ['uat-execution', 'HEALTHY'],
      ['prod-advisor', 'HEALTHY'],
      ['prod-execution', 'HEALTHY'],
    ]);
    const json = JSON.parse((await asOncall(['status', 'prod-execution', '--json'])).stdout);
    expect(json.credentialSets.map((s: { id: string; state: string }) => [s.id, s.state])).toEqual([
      ['prod-execution', 'HEALTHY'],
    ]);
    for (const password of SANDBOX_PASSWORDS) expect(run.stdout + run.stderr).not.toContain(password);
    expect(run.stdout + run.stderr).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
  });

  it('shows, beside the limits of a set with reservations, each reservation and the shared part', async () => {
    // The committed configuration: prod-execution reserves 23 a minute and 400 an hour for portfolio-service,
    // its only consumer. A grant of 25 takes 23 + 2 shared in the minute, 25 of the reservation in the hour.
    const portfolio = new BrokerApi({
      baseUrl: b.broker.vendUrl,
      signer: new FunctionUrlSigner({
        region: 'local',
        credentials: {
          accessKeyId: PORTFOLIO.AWS_ACCESS_KEY_ID,
          secretAccessKey: PORTFOLIO.AWS_SECRET_ACCESS_KEY,
        },
      }),
      clock,
      fetch: globalThis.fetch,
      timeoutMs: 10_000,
      userAgent: 'cli-operator-status-test',
    });
    const token = await portfolio.getToken('prod-execution', undefined);
    await portfolio.acquirePermits('prod-execution', { tokenId: token.tokenId, count: 25 });

    const run = await asOncall(['status', '--wide']);
    expect(run.exit, run.stderr).toBe(0);
    const row = (id: string) => run.stdout.split('\n').find((line) => line.startsWith(`${id} `)) ?? '';
    expect(row('prod-execution')).toContain(
      '25/50 per 1m (portfolio-service 23/23, 0 left; shared 2/27, 25 left), ' +
        '25/1000 per 1h (portfolio-service 25/400, 375 left; shared 0/600, 600 left)',
    );
    // A set without reservations reads as before.
    expect(row('prod-advisor')).toMatch(/\s0\/50 per 1m, 0\/1000 per 1h\s/);
    expect(run.stdout + run.stderr).not.toContain(token.tokenId);

    const json = JSON.parse((await asOncall(['status', 'prod-execution', '--json'])).stdout);
    expect(json.credentialSets[0].quota).toEqual([
      {
        limit: 50,
        windowSeconds: 60,
        used: 25,
        remaining: 25,
        shared: { limit: 27, used: 2, remaining: 25 },
        reservations: [{ consumer: 'portfolio-service', limit: 23, used: 23, remaining: 0 }],
      },
      {
        limit: 1000,
        windowSeconds: 3600,
        used: 25,
        remaining: 975,
        shared: { limit: 600, used: 0, remaining: 600 },
        reservations: [{ consumer: 'portfolio-service', limit: 400, used: 25, remaining: 375 }],
      },
    ]);

    // Past the minute's span (its window plus the ledger's margin), the minute's counters are back to 0.
    const minute = planFor(
      rateLimitSettingsSchema.parse({
        reservations: [{ consumer: 'portfolio-service', perWindow: { 60: 23, 3600: 400 } }],
      }),
    ).general[0];
    await clock.advance((minute?.spanMs ?? Number.NaN) + (minute?.slotMs ?? 0));
    const later = await asOncall(['status', 'prod-execution', '--wide']);
    expect(later.stdout).toContain(
      '0/50 per 1m (portfolio-service 0/23, 23 left; shared 0/27, 27 left), ' +
        '25/1000 per 1h (portfolio-service 25/400, 375 left; shared 0/600, 600 left)',
    );
  });

  it('gets no token: `token` exits 1 with INSUFFICIENT_PERMISSIONS and prints nothing on stdout', async () => {
    const run = await asOncall(['token', 'uat-advisor']);
    expect(run.exit).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/error INSUFFICIENT_PERMISSIONS: .*status only/);
  });
});
