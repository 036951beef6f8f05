import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLocalConfig } from '../local/config.js';
import { ManualClock } from '../shared/clock.js';
import { type CredentialSetInput, parseCredentialSets } from '../shared/config/credential-sets.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import {
  advanceInRandomSteps,
  maxInAnySpan,
  seededRandom,
  type TimedCount,
} from './support/ledger-harness.js';
import { fixture, parseBody, startVendHarness, type TokenBody, withChanges } from './support/vend-harness.js';

/**
 * Two credential sets that log in as one vendor user (one secret, the sandbox user uat-advisor) with
 * `quotaScope: "user"`: the user's 50 a minute is one budget for both, whichever set a consumer asks through.
 * Each set was its own ledger item before, so together they were granted twice the user's quota.
 */
const SETS = ['uat-advisor', 'uat-spare'] as const; // the harness's spare set logs in with the advisor's secret
const CONSUMERS = 20;
const MARGIN_MS = 3000; // rateLimits.marginSeconds: the ledger counts a grant for its window plus this
const SECONDS = 150;

const consumerRule = (i: number) => ({
  name: `consumer-${i}`,
  principalArn: `arn:aws:iam::123456789012:role/consumer-${i}`,
  credentialSets: [...SETS],
});
const asConsumer = (i: number) => ({
  callerArn: `arn:aws:sts::123456789012:assumed-role/consumer-${i}/session-${i}`,
  callerAccountId: '123456789012',
});

describe.each(ENGINES)('one vendor user, one budget, on %s', (engine) => {
  let dynamo: LocalDynamo;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
  });
  afterAll(async () => {
    await dynamo?.close();
  });

  it('20 consumers of two sets of one secret, asking as fast as they can: at most the user’s 50 a minute in all', async () => {
    const clock = new ManualClock();
    const h = await startVendHarness(dynamo, {
      clock,
      setOverrides: { quotaScope: 'user' },
      consumers: Array.from({ length: CONSUMERS }, (_, i) => consumerRule(i)),
    });
    try {
      // Each set logs in on its own: two tokens of the one user.
      const tokens = new Map<string, string>();
      for (const set of SETS) {
        const answer = await h.invoke(
          withChanges(fixture('get-token'), { ...asConsumer(0), path: `/v1/credential-sets/${set}/token` }),
        );
        expect(answer.statusCode, answer.body).toBe(200);
        tokens.set(set, parseBody<TokenBody>(answer).tokenId);
      }
      expect(new Set(tokens.values()).size).toBe(2);

      const grants: (TimedCount & { set: string })[] = [];
      const end = clock.now() + SECONDS * 1000;
      let stopped = false;
      // Every consumer asks through both sets: asks again at once after a grant, after the Retry-After when denied.
      const actor = async (i: number, set: string) => {
        const event = withChanges(fixture('acquire-permits'), {
          ...asConsumer(i),
          path: `/v1/credential-sets/${set}/permits`,
          body: { tokenId: tokens.get(set), count: 1 },
        });
        while (!stopped) {
          const answer = await h.invoke(event);
          if (answer.statusCode === 200) {
            const body = parseBody<{ grantedAt: number; granted: number }>(answer);
            grants.push({ time: body.grantedAt, count: body.granted, set });
            continue;
          }
          expect(answer.statusCode, answer.body).toBe(429);
          const { details } = parseBody<{ details: { retryAfterMs: number } }>(answer);
          await clock.sleep(Math.max(1, details.retryAfterMs));
        }
      };
      const actors = SETS.flatMap((set) => Array.from({ length: CONSUMERS }, (_, i) => actor(i, set)));
      await advanceInRandomSteps(clock, actors.length, end, seededRandom(23));
      stopped = true;
      await clock.advance(3_600_000); // wakes every sleeping consumer, which then stops
      await Promise.all(actors);

      const perMinute = maxInAnySpan(grants, 60_000 + MARGIN_MS);
      const bySet = SETS.map((set) => grants.filter((g) => g.set === set).length);
      const summary = JSON.stringify({ perMinute, bySet });
      expect(perMinute, summary).toBeLessThanOrEqual(50);
      // The budget is used, through both sets (not starved, nor one set's alone).
      expect(perMinute, summary).toBeGreaterThanOrEqual(45);
      expect(Math.min(...bySet), summary).toBeGreaterThan(0);
    } finally {
      await h.close();
    }
  }, 120_000);
});

describe('sets of one secret: the configuration', () => {
  const set = (id: string, more: Partial<CredentialSetInput> = {}): CredentialSetInput => ({
    id,
    environment: 'uat',
    companyRole: 'advisor',
    vendorBaseUrl: 'https://vendor.example',
    secretId: 'token-broker/uat/advisor',
    ...more,
  });
  const ONE_USER =
    '"uat-b" and "uat-a" log in with one secret ("token-broker/uat/advisor"), i.e. as one vendor user';

  it('accepts them with one scope and one rateLimits, or counting per token; other secrets are other users', () => {
    const user = { quotaScope: 'user' } as const;
    expect(parseCredentialSets([set('uat-a', user), set('uat-b', user)])).toHaveLength(2);
    const perMinute = { rateLimits: { general: [{ limit: 20, windowSeconds: 60 }] } };
    expect(parseCredentialSets([set('uat-a'), set('uat-b', perMinute)])).toHaveLength(2);
    expect(
      parseCredentialSets([set('uat-a', user), set('uat-b', { ...user, ...perMinute, secretId: 'other' })]),
    ).toHaveLength(2);
  });

  it.each([
    [
      'one counting per user, the other per token',
      [set('uat-a', { quotaScope: 'user' }), set('uat-b')],
      `credentialSets[1].quotaScope: ${ONE_USER}, but "uat-a" counts its quota per user and "uat-b" per token: give both quotaScope "user" (one budget for the user) or both "token"`,
    ],
    [
      'per user, with other limits',
      [
        set('uat-a', { quotaScope: 'user' }),
        set('uat-b', { quotaScope: 'user', rateLimits: { marginSeconds: 5, permitValiditySeconds: 3 } }),
      ],
      `credentialSets[1].rateLimits: ${ONE_USER}, and with quotaScope "user" both draw on the user's one budget: their rateLimits must be the same (they differ in marginSeconds, permitValiditySeconds)`,
    ],
    [
      'per user and per token, the secret named once by name and once by its ARN',
      [
        set('uat-a', { quotaScope: 'user' }),
        set('uat-b', {
          secretId: 'arn:aws:secretsmanager:eu-west-1:111111111111:secret:token-broker/uat/advisor-AbC123',
        }),
      ],
      `credentialSets[1].quotaScope: ${ONE_USER}, but "uat-a" counts its quota per user and "uat-b" per token`,
    ],
  ])('refuses two sets %s, naming both', (_, sets, expected) => {
    expect(() => parseCredentialSets(sets)).toThrow(`invalid configuration: ${expected}`);
  });

  it('refuses them at the start of the local broker, naming both', () => {
    const dir = mkdtempSync(join(tmpdir(), 'user-budget-'));
    const file = join(dir, 'broker.config.json');
    writeFileSync(
      file,
      JSON.stringify({
        credentialsFile: 'credentials.json',
        credentialSets: [
          { ...set('uat-a', { quotaScope: 'user' }), vendorBaseUrl: undefined },
          { ...set('uat-b'), vendorBaseUrl: undefined },
        ],
        callers: [
          {
            name: 'portfolio',
            accessKeyId: 'AKIALOCALPORTFOLIO01',
            secretAccessKey: 'local-only-portfolio-service-secret',
            principalArn: 'arn:aws:iam::000000000000:role/portfolio-service',
          },
        ],
        consumers: [],
      }),
    );
    expect(() => loadLocalConfig({ BROKER_CONFIG: file })).toThrow(
      `invalid configuration: ${file}.credentialSets[1].quotaScope: ${ONE_USER}, but "uat-a" counts its quota per user and "uat-b" per token`,
    );
  });
});
