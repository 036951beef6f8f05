import { describe, expect, it, vi } from 'vitest';
import { type ConsumerConfig, parseConsumers } from '../shared/config/consumers.js';
import { parseCredentialSets } from '../shared/config/credential-sets.js';
import {
  DIMENSION_CONSUMER,
  DIMENSION_CREDENTIAL_SET,
  Metric,
  PERMIT_METRICS,
} from '../shared/metric-names.js';
import { createPowertoolsTelemetry, MetricUnit } from '../shared/observability.js';
import { AccessPolicy } from '../shared/vend/access-policy.js';
import { ledgerKeyFor } from '../shared/vend/ledger-key.js';
import { fixtureConsumers } from './support/fixture-consumers.js';
import {
  fixture,
  HARNESS_CONSUMERS,
  parseBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

/**
 * Permit accounting (issue 17): PermitsGranted, PermitsReturned and PermitsDenied in permits, per set and per
 * set and consumer (the consumer rule's name from the config), through the real vend handler over dynalite
 * and the sandbox.
 */
const startHarness = vendHarnessPerTest();
let h: VendHarness;
let tokenId: string;

/** The fixture callers: portfolio-service (an assumed role) and batch-runner (an IAM user), both on uat-advisor. */
const BATCH = {
  callerArn: 'arn:aws:iam::123456789012:user/ops/batch-runner',
  callerAccountId: '123456789012',
};
const asPortfolio = {};
const PORTFOLIO_SESSION = 'arn:aws:sts::123456789012:assumed-role/portfolio-service/any-session-name';
/** A credential set as configured (for the access policy alone: nothing logs in). */
const SET_INPUT = {
  environment: 'uat',
  companyRole: 'advisor',
  vendorBaseUrl: 'https://vendor.example',
  secretId: 'broker/uat-advisor',
} as const;

const acquire = (caller: object, body: object) =>
  h.invoke(withChanges(fixture('acquire-permits'), { ...caller, body: { tokenId, ...body } }));
const giveBack = (caller: object, body: object) =>
  h.invoke(withChanges(fixture('return-permits'), { ...caller, body: { tokenId, ...body } }));
const perConsumer = (name: string, consumer: string) =>
  h.telemetry.sum(name, { [DIMENSION_CREDENTIAL_SET]: 'uat-advisor', [DIMENSION_CONSUMER]: consumer });

describe('permit accounting per consumer', () => {
  it('counts permits granted, returned and denied per consumer and set, and the per-set totals once', async () => {
    h = await startHarness();
    tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;

    const portfolioGrant = await acquire(asPortfolio, { count: 5 });
    expect(portfolioGrant.statusCode).toBe(200);
    const batchGrant = await acquire(BATCH, { count: 40 });
    expect(batchGrant.statusCode).toBe(200);
    // 45 of 50 a minute gone: 6 more are denied (counted as 6 permits, not one request), 5 are granted.
    expect((await acquire(BATCH, { count: 6 })).statusCode).toBe(429);
    expect((await acquire(asPortfolio, { count: 5 })).statusCode).toBe(200);
    expect((await acquire(asPortfolio, { count: 2 })).statusCode).toBe(429);
    // Give-backs: 3 of portfolio's first 5, 10 of batch's 40.
    const returned = (grant: typeof portfolioGrant) => parseBody<{ receipt: string }>(grant).receipt;
    const back1 = await giveBack(asPortfolio, { receipt: returned(portfolioGrant), count: 3 });
    expect(parseBody(back1)).toMatchObject({ returned: 3 });
    const back2 = await giveBack(BATCH, { receipt: returned(batchGrant), count: 10 });
    expect(parseBody(back2)).toMatchObject({ returned: 10 });
    // A receipt given back twice returns nothing and counts nothing.
    expect(
      (await giveBack(BATCH, { receipt: returned(batchGrant), count: 10 })).statusCode,
    ).toBeGreaterThanOrEqual(400);

    expect(perConsumer(Metric.PermitsGranted, 'portfolio')).toBe(10);
    expect(perConsumer(Metric.PermitsGranted, 'batch')).toBe(40);
    expect(perConsumer(Metric.PermitsDenied, 'portfolio')).toBe(2);
    expect(perConsumer(Metric.PermitsDenied, 'batch')).toBe(6);
    expect(perConsumer(Metric.PermitsReturned, 'portfolio')).toBe(3);
    expect(perConsumer(Metric.PermitsReturned, 'batch')).toBe(10);
    // The per-set series: each point once, the sum of the consumers'.
    const perSet = (name: string) => h.telemetry.sum(name, { [DIMENSION_CREDENTIAL_SET]: 'uat-advisor' });
    expect([Metric.PermitsGranted, Metric.PermitsDenied, Metric.PermitsReturned].map(perSet)).toEqual([
      50, 8, 13,
    ]);

    // Every permit point: the set as its dimensions, the config's consumer name as its second series, and no
    // ARN, principal or anything else the caller controls.
    const points = h.telemetry.metrics.filter((m) => (PERMIT_METRICS as readonly string[]).includes(m.name));
    expect(points).toHaveLength(7); // 3 grants, 2 denials, 2 give-backs
    for (const point of points) {
      expect(point.unit).toBe(MetricUnit.Count);
      expect(point.dimensions).toEqual({ [DIMENSION_CREDENTIAL_SET]: 'uat-advisor' });
      expect(Object.keys(point.alsoBy ?? {})).toEqual([DIMENSION_CONSUMER]);
      expect(['portfolio', 'batch']).toContain(point.alsoBy?.[DIMENSION_CONSUMER]);
    }
    expect(JSON.stringify(points)).not.toMatch(/arn:|portfolio-service|batch-runner/);
  });

  it('counts nothing for a caller that is not a consumer of the set', async () => {
    h = await startHarness();
    tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
    const outsider = {
      callerArn: 'arn:aws:sts::123456789012:assumed-role/analytics-sandbox/jane.doe@example.com',
    };
    expect((await acquire(outsider, { count: 1 })).statusCode).toBe(403);
    // reporting-service is a consumer of uat-execution only.
    const reporting = {
      callerArn: 'arn:aws:sts::123456789012:assumed-role/reporting-service/reporting-nightly',
    };
    expect((await acquire(reporting, { count: 1 })).statusCode).toBe(403);
    expect(h.telemetry.metrics.filter((m) => (PERMIT_METRICS as readonly string[]).includes(m.name))).toEqual(
      [],
    );
  });
});

describe('permit accounting of a principal with two consumer rules for a set, the second reserved', () => {
  /** The portfolio principal twice on uat-advisor: `portfolio` first, then `portfolio-orders`, which holds 20/min. */
  const twoRules = [
    ...HARNESS_CONSUMERS,
    { ...fixtureConsumers.portfolio, name: 'portfolio-orders' },
  ] satisfies ConsumerConfig[];
  const reservations = [{ consumer: 'portfolio-orders', perWindow: { 60: 20 } }];

  it('counts its permits in the reservation and names the reserved rule in every permit metric', async () => {
    h = await startHarness({ consumers: twoRules, setOverrides: { rateLimits: { reservations } } });
    tokenId = parseBody<{ tokenId: string }>(await h.invoke(fixture('get-token'))).tokenId;
    const set = h.sets.find((s) => s.id === 'uat-advisor');
    if (!set) throw new Error('no uat-advisor');
    const usage = async () => (await h.ledger.usage(ledgerKeyFor(set, tokenId), set.rateLimits)).windows[0];

    // batch takes the whole shared part (50 - 20): what portfolio gets now can only come from the reservation.
    expect((await acquire(BATCH, { count: 30 })).statusCode).toBe(200);
    const grant = await acquire(asPortfolio, { count: 5 });
    expect(grant.statusCode).toBe(200);
    expect(await usage()).toMatchObject({
      used: 35,
      shared: { limit: 30, used: 30, remaining: 0 },
      reservations: [{ consumer: 'portfolio-orders', limit: 20, used: 5, remaining: 15 }],
    });
    // 16 > the 15 left of the reservation, and nothing is shared: denied, under the same name.
    expect((await acquire(asPortfolio, { count: 16 })).statusCode).toBe(429);
    const back = await giveBack(asPortfolio, {
      receipt: parseBody<{ receipt: string }>(grant).receipt,
      count: 2,
    });
    expect(parseBody(back)).toMatchObject({ returned: 2 });
    expect(await usage()).toMatchObject({ reservations: [{ consumer: 'portfolio-orders', used: 3 }] });

    expect(
      [Metric.PermitsGranted, Metric.PermitsDenied, Metric.PermitsReturned].map((name) =>
        perConsumer(name, 'portfolio-orders'),
      ),
    ).toEqual([5, 16, 2]);
    expect(perConsumer(Metric.PermitsGranted, 'batch')).toBe(30);
    const named = h.telemetry.metrics
      .filter((m) => (PERMIT_METRICS as readonly string[]).includes(m.name))
      .map((m) => m.alsoBy?.[DIMENSION_CONSUMER]);
    expect(named).not.toContain('portfolio');
  });

  it('is one consumer per set in the access policy: the reserved rule, whatever the order', () => {
    const sets = parseCredentialSets([
      { ...SET_INPUT, id: 'uat-advisor', rateLimits: { reservations } },
      { ...SET_INPUT, id: 'uat-execution' },
    ]);
    const role = fixtureConsumers.portfolio.principalArn;
    const rules = (names: string[]) =>
      parseConsumers(
        names.map((name) => ({ name, principalArn: role, credentialSets: ['uat-advisor', 'uat-execution'] })),
        ['uat-advisor', 'uat-execution'],
      );
    for (const names of [
      ['portfolio', 'portfolio-orders'],
      ['portfolio-orders', 'portfolio'],
    ]) {
      const caller = new AccessPolicy(sets, rules(names)).identify(PORTFOLIO_SESSION, '123456789012');
      // The reservation picks uat-advisor's; uat-execution has none, so the first rule stays its consumer.
      expect(Object.fromEntries(caller.consumerBySet), names.join(' then ')).toEqual({
        'uat-advisor': 'portfolio-orders',
        'uat-execution': names[0],
      });
    }
  });
});

describe('the Consumer of a caller', () => {
  it('is, per set, the first consumer rule in the configuration that lets the principal use it', () => {
    const role = 'arn:aws:iam::123456789012:role/portfolio-service';
    const sets = parseCredentialSets(
      ['uat-advisor', 'uat-execution', 'uat-spare'].map((id) => ({ ...SET_INPUT, id })),
    );
    const consumers = parseConsumers(
      [
        { name: 'portfolio', principalArn: role, credentialSets: ['uat-advisor'] },
        { name: 'portfolio-batch', principalArn: role, credentialSets: ['uat-advisor', 'uat-execution'] },
      ],
      ['uat-advisor', 'uat-execution', 'uat-spare'],
    );
    const caller = new AccessPolicy(sets, consumers).identify(PORTFOLIO_SESSION, '123456789012');
    expect(Object.fromEntries(caller.consumerBySet)).toEqual({
      'uat-advisor': 'portfolio',
      'uat-execution': 'portfolio-batch',
    });
  });
});

describe('the EMF record of a permit metric (Powertools)', () => {
  it('publishes two records, without Powertools warnings: per set, and per set and consumer', () => {
    // Powertools writes its warnings with a Console of its own, on stderr.
    const warnings: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      warnings.push(String(chunk));
      return true;
    });
    const lines: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      createPowertoolsTelemetry().metric(
        Metric.PermitsGranted,
        MetricUnit.Count,
        7,
        { [DIMENSION_CREDENTIAL_SET]: 'uat-advisor' },
        { [DIMENSION_CONSUMER]: 'portfolio' },
      );
    } finally {
      spy.mockRestore();
      stderr.mockRestore();
    }
    const records = lines
      .flatMap((line) => line.split('\n'))
      .filter((line) => line.includes('"_aws"'))
      .map(
        (line) => JSON.parse(line) as Record<string, unknown> & { _aws: { CloudWatchMetrics: unknown[] } },
      );
    expect(records).toHaveLength(2);
    const directives = records.map(
      (record) =>
        (
          record._aws.CloudWatchMetrics as {
            Namespace: string;
            Dimensions: string[][];
            Metrics: { Name: string; Unit: string }[];
          }[]
        )[0],
    );
    for (const directive of directives) {
      expect(directive?.Namespace).toBe('TokenBroker');
      expect(directive?.Metrics).toEqual([{ Name: 'PermitsGranted', Unit: 'Count' }]);
    }
    expect(directives.map((d) => d?.Dimensions.map((set) => [...set].sort()))).toEqual([
      [['CredentialSet', 'service']],
      [['Consumer', 'CredentialSet', 'service']],
    ]);
    expect(records[0]).toMatchObject({ PermitsGranted: 7, CredentialSet: 'uat-advisor' });
    expect(records[0]).not.toHaveProperty('Consumer');
    expect(records[1]).toMatchObject({
      PermitsGranted: 7,
      CredentialSet: 'uat-advisor',
      Consumer: 'portfolio',
    });
    expect(warnings).toEqual([]);
  });
});
