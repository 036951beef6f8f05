import { expect } from 'vitest';
import { runSoak, SOAK_DEFAULTS, soakFailures } from '../../local/soak.js';
// Every soak waits on real time: its files run in `npm run test:long` (docs/testing.md).
import './real-time.js';

/**
 * The end-to-end soak, shortened for the suite (`npm run soak` runs the full one): the local broker with
 * tokens living 60 s, 20 consumers using the client library for two lifetimes. One file per window mode, so
 * the two run side by side. It waits on real time (two minutes), so its files run in `npm run test:long`.
 *
 * Its margins are what makes it hold under load. Time is real here, so a process starved of CPU between the
 * client's last check and the vendor's reading of a request moves that request later: with a 1 s validity
 * floor, a loaded 2-core machine produced vendor 401s (tokens that expired on the way). The floor the client
 * and the broker keep is 3 s (and a token is not used with less than 4 s left), the ledger's send margin 1 s
 * beyond a 0.25 s permit validity: stalls shorter than that cannot turn into a 401 or a 429.
 *
 * Past a stall longer than the floor, no margin helps: a request the client sent with at least the floor left
 * that the vendor still read after exp spent longer than the floor on the way (client and vendor sandbox share
 * this process, so a starved process is such a way). Those 401s are counted apart (vendor401InTransit, with
 * the slowest request) and printed; a 401 of any other kind fails. (Two 401s were seen once, with a CPU
 * burner and three other builds beside the suite on a 2-core machine, before the soak told them apart; the
 * client could then also send a token that a permit wait had taken below the floor, which it no longer does.)
 *
 * What it gates on is what load cannot change: no vendor 429 or 401 the broker could have avoided, one login per lifetime, no secret in a
 * log, no client error, traffic reaching the vendor on every token. How much of the quota is used in real time
 * depends on the machine (measured 84-100 % on an idle 2-core machine, 72-79 % under load): that figure is
 * printed here and gated only by `npm run soak` (≥ 95 %), never by `npm test`.
 */

const LIFETIMES = 2;

/** The short soak's token lifetime, schedule and margins (the comment above says why they hold under load). */
export const SHORT_SOAK = {
  ...SOAK_DEFAULTS,
  tokenLifetimeSeconds: 60,
  // Per token the smaller of these and 20 % / 5 % of its life: re-login 10-12 s before exp, floor 3 s.
  softThresholdSeconds: 12,
  softThresholdJitterSeconds: 2,
  hardFloorSeconds: 3,
  refreshIntervalSeconds: 0.5,
  marginSeconds: 1,
  permitValiditySeconds: 0.25,
};

export async function shortSoak(windowKind: 'fixed' | 'sliding'): Promise<void> {
  const result = await runSoak({ ...SHORT_SOAK, windowKind, lifetimes: LIFETIMES });
  expect(result.rows).toHaveLength(2);
  for (const row of result.rows) {
    expect(row.vendorRequests).toBeGreaterThan(0);
    expect(row.tokens).toBeGreaterThanOrEqual(LIFETIMES);
  }
  console.info(
    JSON.stringify(
      result.rows.map((row) => ({
        set: row.set,
        quotaUsedPct: row.quotaUsedPct,
        vendor401InTransit: row.vendor401InTransit,
        slowestVendorMs: row.slowestVendorMs,
      })),
    ),
  );
  expect(soakFailures(result)).toEqual([]);
  expect(result.clientErrors).toEqual({});
}

export const SOAK_TEST_NAME =
  'keeps the vendor from ever answering 429 or 401, logs in once per lifetime, and leaks no secret';
/** A bound on a hang, not a timing: the soak itself runs two 60 s lifetimes. */
export const SOAK_TIMEOUT_MS = 400_000;
