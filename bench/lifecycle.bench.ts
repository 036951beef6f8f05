/**
 * Token-lifecycle figures for `npm run bench` (issue 13). Simulated time on a ManualClock; everything else
 * real and in-process: the vend handler and the refresher, dynalite through the real DynamoDB client, the
 * vendor sandbox over HTTP on 127.0.0.1.
 */

import { DynamoTokenStore } from '../shared/tokens/index.js';
import { startDynalite } from '../test/support/dynalite.js';
import {
  FIXED_THRESHOLDS,
  lifetimeRun,
  propagationRun,
  quotaScopeRun,
  skewOutageRun,
  wrongPasswordRun,
} from '../test/support/lifecycle-sims.js';

type Row = Record<string, string | number>;
const pct = (share: number): string => `${(share * 100).toFixed(1)} %`;

export async function run(): Promise<{ title: string; rows: Row[] }[]> {
  const dynamo = await startDynalite();
  try {
    const skewRows: Row[] = [];
    for (const offset of [400, -400, 0]) {
      const r = await skewOutageRun(dynamo, offset);
      skewRows.push({
        'vendor clock (s)': offset > 0 ? `+${offset}` : offset,
        'tokens vended': r.tokensVended,
        '503 (no usable token)': r.unavailable,
        'vendor said TOKEN_EXPIRED': r.vendorSaidExpired,
        'other vendor 401': r.vendorOther401,
        'max |expiresIn − vendor view| (s)': r.maxExpiresInErrorSeconds,
        'least vendor validity vended (s)': r.minVendorValiditySeconds,
      });
    }

    const lifetimeRows: Row[] = [];
    const cases = [
      { lifetimeSeconds: 600, periodSeconds: 60 },
      { lifetimeSeconds: 1800, periodSeconds: 180 },
      { lifetimeSeconds: 4 * 3600, periodSeconds: 300 },
      { lifetimeSeconds: 8 * 3600, periodSeconds: 300 },
    ];
    for (const [label, refresh] of [
      ['relative (issue 13)', undefined],
      ['fixed (before)', FIXED_THRESHOLDS],
    ] as const) {
      for (const c of cases) {
        const r = await lifetimeRun(dynamo, { ...c, hours: 24, ...(refresh ? { refresh } : {}) });
        lifetimeRows.push({
          thresholds: label,
          lifetime:
            c.lifetimeSeconds >= 3600 ? `${c.lifetimeSeconds / 3600} h` : `${c.lifetimeSeconds / 60} min`,
          'run every': `${c.periodSeconds / 60} min`,
          logins: r.logins,
          'logins per token': r.loginsPerToken.toFixed(2),
          'runs that logged in': `${r.runsThatLoggedIn}/${r.runs}`,
          'share of life in use (min)': pct(r.minShareInUse),
          'share of life in use (mean)': pct(r.meanShareInUse),
          '503 to the consumer': r.consumerRefusals,
        });
      }
    }

    const outageRows: Row[] = [];
    for (const lifetimeSeconds of [4 * 3600, 8 * 3600]) {
      const r = await lifetimeRun(dynamo, {
        lifetimeSeconds,
        periodSeconds: 300,
        hours: 12,
        outageMinutes: 40,
      });
      outageRows.push({
        lifetime: `${lifetimeSeconds / 3600} h`,
        'outage (min)': r.outageMinutes,
        'outage began with (s left)': r.outageStartedWithLeftSeconds ?? '-',
        '503 to the consumer': r.consumerRefusals,
        'vended below the floor': r.vendedBelowFloor,
        'logins per token': r.loginsPerToken.toFixed(2),
        'share of life in use (min)': pct(r.minShareInUse),
      });
    }

    const wrong = await wrongPasswordRun(dynamo, 24);
    const wrongRows: Row[] = [
      {
        'simulated hours': wrong.hours,
        'login attempts the vendor saw': wrong.vendorLoginAttempts,
        'gaps between attempts': wrong.gapsSeconds.map((g) => `${g / 60} min`).join(', '),
        'token requests (each 503)': wrong.tokenRequests,
        'new secret version logs in on the next run': wrong.newVersionLoggedInOnNextRun ? 'yes' : 'no',
      },
    ];

    const quotaRows: Row[] = [];
    for (const [scope, counts] of [
      ['token', 'token'],
      ['token', 'user'],
      ['user', 'user'],
      ['user', 'token'],
    ] as const) {
      const r = await quotaScopeRun(dynamo, scope, counts, 180);
      quotaRows.push({
        quotaScope: r.quotaScope,
        'vendor counts per': r.vendorCounts,
        'sent per minute': r.sentPerMinute,
        'vendor accepted': r.vendorAccepted,
        'vendor 429': r.vendor429,
      });
    }

    const propagationRows: Row[] = [];
    for (const versionCheckMs of [1000, 0]) {
      const r = await propagationRun(dynamo, {
        instances: 20,
        versionCheckMs,
        stepMs: versionCheckMs === 0 ? 500 : 100,
        afterMs: versionCheckMs === 0 ? 31_000 : 3000,
      });
      propagationRows.push({
        'version check': versionCheckMs === 0 ? 'off (30 s TTL only)' : `every ${versionCheckMs} ms`,
        instances: r.instances,
        'last rejected token served (ms after the report)': r.lastStaleServeMs,
        'rejected token answers': r.staleAnswers,
        'full reads / instance / s (warm)': r.fullReadsPerInstanceSecond,
        'version reads / instance / s (warm)': r.versionReadsPerInstanceSecond,
      });
    }

    // What a version check costs next to a full read: real time on loopback dynalite (a relative figure).
    const costRows: Row[] = [];
    {
      const store = new DynamoTokenStore({
        client: dynamo.client,
        tableName: await dynamo.createTable('tokens'),
      });
      const now = Date.now();
      const exp = Math.floor(now / 1000) + 14_400;
      await store.takeLease({
        credentialSetId: 'uat-advisor',
        holder: 'bench',
        leaseId: 'bench',
        now,
        leaseExpiresAt: now + 60_000,
        lastAttemptNoLaterThan: now,
        expectedTokenId: null,
      });
      await store.promote({
        credentialSetId: 'uat-advisor',
        leaseId: 'bench',
        now,
        token: {
          tokenId: '0123456789abcdef',
          // A JWT-sized value: the item is as large as a real one.
          accessToken: 'x'.repeat(600),
          exp,
          issuedAt: exp - 14_400,
          env: 'uat',
          obtainedAt: now,
          usableUntil: (exp - 300) * 1000,
          vendorClockSkewSeconds: 0,
          lifetimeSeconds: 14_400,
          tenant: 'uat-advisor-tenant',
          companyKey: 'CMP-UAT-ADVISOR',
          executionPlatformKey: 'EXP-UAT-0001',
          userKey: 'USR-UAT-ADV-0001',
          username: 'uat-advisor',
          roles: ['ADVISOR'],
          groups: [101, 102],
          defaultCompanyInventorySource: 'MARKET',
        },
      });
      const N = 500;
      for (const [what, call] of [
        ['full read (GetItem, consistent)', () => store.read('uat-advisor', Date.now())],
        ['version check (GetItem of `version`, consistent)', () => store.readVersion('uat-advisor')],
      ] as const) {
        for (let i = 0; i < 50; i++) await call(); // warm-up
        const started = performance.now();
        for (let i = 0; i < N; i++) await call();
        costRows.push({
          'tokens-table call': what,
          calls: N,
          'ms per call (real time, loopback dynalite)': Number(
            ((performance.now() - started) / N).toFixed(2),
          ),
        });
      }
    }

    return [
      {
        title:
          'Vendor clock skew, 4 h tokens, 1 h login outage from the due run (simulated 6 h, HTTP sandbox, dynalite)',
        rows: skewRows,
      },
      {
        title:
          'Token lifetimes over 24 simulated hours, a consumer every minute (logins per token, share of life from login to next login)',
        rows: lifetimeRows,
      },
      {
        title: 'A 40-minute login outage from the soft threshold (simulated 12 h, a consumer every minute)',
        rows: outageRows,
      },
      {
        title: 'A wrong password for 24 simulated hours (a run every 5 min, a consumer every minute)',
        rows: wrongRows,
      },
      {
        title: 'Quota scope across a re-login: 4 consumers saturating 2 live tokens for 180 simulated s',
        rows: quotaRows,
      },
      {
        title:
          'One rejection report at the worst moment, 20 vend instances with their own caches (simulated ms, in-process)',
        rows: propagationRows,
      },
      {
        title:
          'The warm cache version check next to a full read (real time, in-process, dynalite on 127.0.0.1)',
        rows: costRows,
      },
    ];
  } finally {
    await dynamo.close();
  }
}
