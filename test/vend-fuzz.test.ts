import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLedger } from '../shared/ledger/index.js';
import { type LocalDynamo, startDynalite } from './support/dynalite.js';
import { fuzzEvents } from './support/vend-fuzz-events.js';
import {
  errorBodyProblems,
  fixture,
  parseBody,
  startVendHarness,
  type VendHarness,
} from './support/vend-harness.js';

let dynamo: LocalDynamo;
let h: VendHarness;
let accessToken: string;
let tokenId: string;
/** Ledger calls that may write, counted: a refused request must cause none. */
const ledgerCalls = { acquire: 0, giveBack: 0, reportVendorFeedback: 0 };

beforeAll(async () => {
  dynamo = await startDynalite();
  h = await startVendHarness(dynamo);
  const body = parseBody<{ accessToken: string; tokenId: string }>(await h.invoke(fixture('get-token')));
  accessToken = body.accessToken;
  tokenId = body.tokenId;
  const ledger = h.ledger as RateLedger;
  for (const name of ['acquire', 'giveBack', 'reportVendorFeedback'] as const) {
    const original = ledger[name].bind(ledger) as (...args: unknown[]) => Promise<unknown>;
    (ledger as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      ledgerCalls[name]++;
      return original(...args);
    };
  }
});
afterAll(async () => {
  await h.close();
  await dynamo.close();
});

const JWT = /eyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]+/;

describe('fuzz: malformed Function URL requests', () => {
  it('never a 5xx, never a token outside a 200, every error body well formed, nothing written on refusal', async () => {
    let runs = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fuzzEvents(tokenId), async (event) => {
        runs++;
        const refreshesBefore = h.refreshInvoker.calls;
        const before = { ...ledgerCalls };
        const result = await h.invoke(event);
        statuses.set(result.statusCode, (statuses.get(result.statusCode) ?? 0) + 1);
        expect(result.statusCode).toBeGreaterThanOrEqual(200);
        expect(result.statusCode).toBeLessThan(500);
        const seen = `${result.body ?? ''}${JSON.stringify(result.headers)}`;
        if (result.statusCode !== 200) {
          expect(seen).not.toContain(accessToken);
          expect(seen).not.toMatch(JWT);
        }
        if (result.statusCode >= 400) {
          expect(errorBodyProblems(result)).toEqual([]);
          expect(h.refreshInvoker.calls).toBe(refreshesBefore);
          // A 429 comes from a denial, and a refused receipt from the ledger's check of it (the item's secret,
          // the open grants): both decided without writing; anything else never reached the ledger.
          const { details } = parseBody<{ details?: { field?: string; reason?: string } }>(result);
          const receiptRefused = details?.field === 'receipt' && details.reason !== undefined;
          const expected =
            result.statusCode === 429
              ? { ...before, acquire: before.acquire + 1 }
              : receiptRefused
                ? { ...before, giveBack: before.giveBack + 1 }
                : before;
          expect(ledgerCalls).toEqual(expected);
        }
      }),
      { numRuns: 2000, seed: Number(process.env.FUZZ_SEED ?? 20260105), endOnFailure: true },
    );
    const refused = [...statuses].filter(([status]) => status >= 400).reduce((sum, [, n]) => sum + n, 0);
    expect(runs).toBe(2000);
    expect(refused).toBeGreaterThanOrEqual(1000);
    // The generator must reach deep: refusals of every kind, and some requests that get through.
    for (const status of [200, 400, 403, 404, 405, 413, 429])
      expect(statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
    expect(h.telemetry.dump()).not.toContain(accessToken);
  });

  it('events that are not even objects get a 404 error body, not a crash', async () => {
    for (const event of [
      null,
      undefined,
      42,
      'GET /',
      [],
      { requestContext: 'x' },
      { rawPath: 5, headers: [] },
    ]) {
      const result = await h.handler(event as never, {} as never);
      expect(result.statusCode).toBe(404);
      expect(errorBodyProblems(result)).toEqual([]);
    }
  });
});
