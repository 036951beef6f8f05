import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busiestSpans, spanExcesses } from '../local/soak-report.js';
import { type Sandbox, type SandboxFamily, startSandbox, type WindowKind } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { DynamoRateLedger, InvalidPermitCountError, LedgerUnavailableError } from '../shared/ledger/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient, type FaultyDynamoDb } from './support/faulty-dynamodb.js';
import { enginesTakingTurns, propertyRuns } from './support/property-runs.js';
import { call, tokenFor } from './support/sandbox-http.js';

/**
 * Issue 24's property: class limits and windows hidden in the vendor sandbox (its endpoint families, fixed or
 * sliding), random demand mixing general, report and rebalancing requests, and DynamoDB faults (lost answers of
 * applied writes, throttles, 500s): a consumer that takes a ledger permit before each request, and sends it at
 * once, never makes the vendor serve more than a limit in any span of its window, general or a family's (the
 * vendor's own log, checked by the soak's span checker), and meets no 429 after learning.
 *
 * The ledger and the sandbox share one manual clock, so sends happen at the grant's instant: the margin only
 * covers the ring's slots. One sandbox and one table per engine; each run logs in afresh (a new token: a fresh
 * vendor quota and a fresh ledger item) and sets the sandbox's hidden limits.
 *
 * VARIANTS: `configured` gives the ledger the hidden limits. `learned` gives it the classes with no limits (`[]`,
 * contract point 1) and reports each class answer's X-RateLimit-* with its `class` (contract point 3), as the
 * client does.
 */
type Variant = 'configured' | 'learned';
const VARIANTS: Variant[] = ['configured', 'learned'];

const FAMILY_NAMES = ['reports', 'rebalancing'] as const;
/** Runs per engine and variant; `npm test` runs the first of them (the same seed). */
const RUNS = propertyRuns({ quick: 12, full: 100 });
const SEED = Number(process.env.CLASSES_PROPERTY_SEED ?? 20_260_124);

const limitArb = (min: number, max: number) =>
  fc.record({ limit: fc.integer({ min, max }), windowSeconds: fc.constantFrom(2, 3, 5, 8) });
/** One or two limits of distinct windows. */
const limitsArb = (min: number, max: number) =>
  fc.uniqueArray(limitArb(min, max), { minLength: 1, maxLength: 2, selector: (l) => l.windowSeconds });

const scenarioArb = fc.record({
  windowKind: fc.constantFrom<WindowKind>('fixed', 'sliding'),
  general: limitsArb(4, 12),
  families: fc.tuple(limitsArb(1, 4), limitsArb(1, 4)),
  faults: fc.record({
    lostAnswer: fc.double({ min: 0, max: 0.15, noNaN: true }),
    throttle: fc.double({ min: 0, max: 0.15, noNaN: true }),
    serverError: fc.double({ min: 0, max: 0.15, noNaN: true }),
  }),
  steps: fc.array(
    fc.record({
      advanceMs: fc.integer({ min: 0, max: 1500 }),
      kind: fc.constantFrom('general', ...FAMILY_NAMES),
      count: fc.integer({ min: 1, max: 3 }),
    }),
    { minLength: 5, maxLength: 20 },
  ),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

/** Served requests over a limit in one of the vendor's own fixed windows (aligned to its clock's epoch). */
function fixedWindowExcesses(
  log: ReturnType<Sandbox['requestLog']>,
  quotas: readonly {
    family: string | undefined;
    limits: readonly { limit: number; windowSeconds: number }[];
  }[],
): string[] {
  const out: string[] = [];
  for (const { family, limits } of quotas)
    for (const { limit, windowSeconds } of limits) {
      const counts = new Map<string, number>();
      for (const entry of log) {
        if (!entry.served || (family !== undefined && entry.family !== family)) continue;
        const key = `${entry.quotaKey}|${Math.floor(entry.at / (windowSeconds * 1000))}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const most = Math.max(0, ...counts.values());
      if (most > limit)
        out.push(`${family ?? 'general'} ${limit}/${windowSeconds}s: ${most} served in one window`);
    }
  return out;
}

const pathOf = (kind: string, n: number) =>
  kind === 'general' ? `/users/1/uat-advisor-tenant/serviceKey/k-${n}` : `/${kind}/r-${n}`;

// Each engine in turn (issue 34: npm test in three minutes): npm test runs the block below on DynamoDB Local,
// test:long on dynalite (test/support/property-runs.ts).
const IN_TURN = enginesTakingTurns(ENGINES, 1);

describe.each(IN_TURN)('hidden class limits under random demand and DynamoDB faults on %s', (engine) => {
  let dynamo: LocalDynamo;
  let faulty: FaultyDynamoDb;
  let table: string;
  let sandbox: Sandbox;
  const clock = new ManualClock();
  let runs = 0;
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    table = await dynamo.createTable('classes-property');
    faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint, seed: SEED });
    sandbox = await startSandbox({ environment: 'uat', clock, quiet: true, recordRequests: true });
  });
  afterAll(async () => {
    await sandbox.close();
    faulty.client.destroy();
    await dynamo.close();
  });

  /** One scenario: the figures the property is about. */
  async function run(variant: Variant, scenario: Scenario) {
    const families: SandboxFamily[] = FAMILY_NAMES.map((name, i) => ({
      name,
      pathPrefix: `/${name}/`,
      limits: scenario.families[i] ?? [],
    }));
    sandbox.update({ limits: scenario.general, families, windowKind: scenario.windowKind });
    sandbox.resetStats();
    await clock.advance(60_000); // nothing of the last run is in any window
    const token = await tokenFor(sandbox.url, 'uat-advisor', 'uat-advisor-sandbox-pw');
    const tokenId = createHash('sha256').update(token).digest('hex').slice(0, 16);
    const limits = rateLimitSettingsSchema.parse({
      general: scenario.general,
      classes: Object.fromEntries(families.map((f) => [f.name, variant === 'configured' ? f.limits : []])),
      marginSeconds: 0.5,
      permitValiditySeconds: 0.25,
    });
    // Each run its own set: what a set learned (learned#<set>) must not carry into the next run's hidden limits.
    const setId = `set-${++runs}`;
    const ledger = new DynamoRateLedger({
      client: faulty.client,
      tableName: table,
      clock,
      conflictJitterMs: 1,
    });
    faulty.faults.set(scenario.faults);
    /** When each class's first answer came (the vendor first told its limit), and each 429 with its class. */
    const firstAnswerAt = new Map<string, number>();
    const rateLimited: { kind: string; at: number }[] = [];
    let sent = 0;
    try {
      for (const step of scenario.steps) {
        await clock.advance(step.advanceMs);
        const cls = step.kind === 'general' ? undefined : step.kind;
        // The ledger refuses an ask larger than the smallest limit it knows applies: ask at most that.
        const known = [...limits.general, ...(cls ? (limits.classes[cls] ?? []) : [])];
        const count = Math.min(step.count, ...known.map((l) => l.limit));
        let decision: Awaited<ReturnType<DynamoRateLedger['acquire']>>;
        const ask = (n: number) =>
          ledger.acquire({
            tokenId,
            count: n,
            limits,
            setId,
            caller: 'consumer',
            ...(cls ? { class: cls } : {}),
          });
        try {
          // A learned class's largest grant is what was learned so far (the probe's 1 at first): an ask above it
          // is refused as a bad count, and asked again as 1, as the client shrinks its ask to the maxCount.
          decision = await ask(count).catch((error: unknown) => {
            if (variant === 'learned' && error instanceof InvalidPermitCountError) return ask(1);
            throw error;
          });
        } catch (error) {
          // Fail closed: no ledger answer, no permit (and no request).
          if (error instanceof LedgerUnavailableError) continue;
          throw error;
        }
        if (!decision.granted) continue;
        for (let i = 0; i < decision.count; i++) {
          const reply = await call(sandbox.url, 'GET', pathOf(step.kind, sent++), { token });
          const at = clock.now();
          if (cls !== undefined && !firstAnswerAt.has(cls)) firstAnswerAt.set(cls, at);
          if (reply.status === 429) rateLimited.push({ kind: step.kind, at });
          if (variant === 'learned' && cls !== undefined) {
            // As the client reports a class answer (contract point 3): its headers, with the class named.
            const report = {
              tokenId,
              limits,
              setId,
              caller: 'consumer',
              class: cls,
              limit: Number(reply.headers.get('x-ratelimit-limit')),
              remaining: Number(reply.headers.get('x-ratelimit-remaining')),
              reset: Number(reply.headers.get('x-ratelimit-reset')),
              ...(reply.status === 429
                ? { retryAfterSeconds: Number(reply.headers.get('retry-after')) }
                : {}),
            };
            await ledger.reportVendorFeedback(report).catch((error: unknown) => {
              if (!(error instanceof LedgerUnavailableError)) throw error;
            });
          }
        }
      }
    } finally {
      faulty.faults.off();
    }
    const quotas = [
      { family: undefined, limits: scenario.general },
      ...families.map((f) => ({ family: f.name as string | undefined, limits: f.limits })),
    ];
    return {
      sent,
      // Configured limits: every span (the ledger's rings hold the strict sliding reading). Learned ones against
      // fixed windows: the vendor's own windows, since a first answer seen late in one implies only a short
      // window (docs/class-limits.md, I3): what the vendor served in each of its windows, and no 429 after learning.
      excesses:
        variant === 'learned' && scenario.windowKind === 'fixed'
          ? fixedWindowExcesses(sandbox.requestLog(), quotas)
          : spanExcesses(busiestSpans(sandbox.requestLog(), quotas)),
      /** 429s of a class before its first answer (learning), and every other 429. */
      learning429: rateLimited.filter(
        (r) => r.kind !== 'general' && r.at <= (firstAnswerAt.get(r.kind) ?? 0),
      ),
      after429: rateLimited.filter((r) => r.kind === 'general' || r.at > (firstAnswerAt.get(r.kind) ?? 0)),
    };
  }

  it.each(VARIANTS)(
    'keeps every span of every window within its limit, with no 429 after learning (%s class limits)',
    async (variant) => {
      let requests = 0;
      await fc.assert(
        fc.asyncProperty(scenarioArb, async (scenario) => {
          const figures = await run(variant, scenario);
          requests += figures.sent;
          expect(figures.excesses).toEqual([]);
          expect(figures.after429).toEqual([]);
          // Learning: at most one 429 per class (configured: the ledger knew, so none).
          const perClass = FAMILY_NAMES.map(
            (name) => figures.learning429.filter((r) => r.kind === name).length,
          );
          for (const count of perClass) expect(count).toBeLessThanOrEqual(variant === 'configured' ? 0 : 1);
        }),
        { numRuns: RUNS, seed: SEED },
      );
      // The runs sent requests: the property was about something.
      expect(requests).toBeGreaterThan(RUNS);
    },
    120_000,
  );
});
