import { DATE_LAG_MS } from '../ledger/ledger-clock.js';
import { DEFAULT_ATTEMPT_TIMEOUT_MS } from '../vendor-client/retry-settings.js';
import type { StoredToken } from './token-state.js';

/**
 * The vendor's clock minus the ledger's, in ms: somewhere in [lo, hi]. The ledger's clock is DynamoDB's, the one
 * every ledger process corrects its own to (ledger-clock.ts), so the interval means the same in every process; a
 * process's ledger time is within its own estimate of DynamoDB's, which is the ledger's to add where it matters.
 * What it is for: `X-RateLimit-Reset` is a time on the vendor's clock, and the ledger keeps its own.
 */
export interface VendorOffsetInterval {
  lo: number;
  hi: number;
}

/**
 * DynamoDB's clock minus this process's, as far as its answers tell (ms, in [lo, hi]); undefined before the
 * first answer. A ClockReference fed by shared/aws/dynamodb-date-reference.ts is one.
 */
export interface DynamoClockEstimate {
  offset(): { lo: number; hi: number } | undefined;
}

/**
 * For a token measured before the field existed (only `vendorClockSkewSeconds` is stored): how long the login's
 * round trip, which the stored value does not show, may have been. An accepted answer came back within the vendor
 * client's per-attempt timeout (10 s in every release so far: no refresher sets another), so this is a bound, not
 * a guess; it is wide, but such tokens only live out the rollout (a token lives at most a day).
 */
export const LOGIN_ROUND_TRIP_ALLOWANCE_MS = DEFAULT_ATTEMPT_TIMEOUT_MS;

/**
 * For a token whose login answer had no `Date` (nothing measured): the vendor's clock taken as ours, as every
 * validity decision on such a token already takes it (vendorClockSkewSeconds absent = 0, with a warning at
 * login), give or take the second a `Date` header could not have told apart from agreement. An assumption, not a
 * measurement: without a Date nothing bounds the vendor's clock.
 */
export const UNMEASURED_VENDOR_OFFSET_MS: Readonly<VendorOffsetInterval> = Object.freeze({
  lo: -1000,
  hi: 1000,
});

/**
 * The interval stored at login, from the login `Date`'s bounds on the vendor's clock minus the refresher's
 * (`least`..`most`, token-check.ts vendorSkewBounds: its whole second and the round trip) and DynamoDB's clock
 * minus the refresher's (`dynamo`): vendor − DynamoDB = (vendor − ours) − (DynamoDB − ours), each end taken at
 * its widest. `hi` also allows the vendor's `Date` to be late by DATE_LAG_MS, as ClockReference does DynamoDB's
 * (a server that formats it from a per-second cache).
 *
 * Without an estimate of DynamoDB's clock, ours is taken as DynamoDB's: where no reference is attached (tests on
 * a simulated clock, tools) that is exact, since the ledger then runs on this same local clock (LedgerClock
 * without a reference); a refresher with one always has answers before it logs in (the state read and the
 * lease write), unless none carried a usable `Date`, and then it assumes what LedgerClock does while the two
 * agree: Lambda's clock and DynamoDB's are both kept by NTP.
 */
export function vendorOffsetAtLogin(
  vendor: { least: number; most: number },
  dynamo: { lo: number; hi: number } | undefined,
): VendorOffsetInterval {
  const { lo, hi } = dynamo ?? { lo: 0, hi: 0 };
  return { lo: vendor.least - hi, hi: vendor.most + DATE_LAG_MS - lo };
}

/**
 * The vendor's clock minus the ledger's for a token, whatever release wrote it: as measured at login when stored;
 * else from `vendorClockSkewSeconds` alone, with our clock taken as DynamoDB's (skewOnlyOffset); else
 * UNMEASURED_VENDOR_OFFSET_MS.
 */
export function vendorOffsetOf(
  token: Pick<StoredToken, 'vendorOffsetMs' | 'vendorClockSkewSeconds'>,
): VendorOffsetInterval {
  if (token.vendorOffsetMs) return { lo: token.vendorOffsetMs.lo, hi: token.vendorOffsetMs.hi };
  if (token.vendorClockSkewSeconds !== undefined) return skewOnlyOffset(token.vendorClockSkewSeconds);
  return { ...UNMEASURED_VENDOR_OFFSET_MS };
}

/**
 * What `vendorClockSkewSeconds` alone says of the vendor's clock minus ours (ms), for either way it was written:
 * - to the ms (releases since the skew was kept on the safe side): the top of the Date's interval, `most`; the
 *   truth is in [most − 1 s − the round trip, most], and DATE_LAG_MS above it for a late Date;
 * - in whole seconds (release N-1 and before): `trunc((Date − received) / 1000)`, toward zero, so Date − received
 *   is within a second either side of it, and the truth up to a second and a round trip above that.
 * A value with a fraction of a second is the first kind; a whole one may be either (the first with its ms at 0),
 * and gets the union: wide (about 23 s), but certain, and only until those tokens expire.
 */
function skewOnlyOffset(skewSeconds: number): VendorOffsetInterval {
  // Stored as ms / 1000: back to the whole ms it was.
  const skewMs = Math.round(skewSeconds * 1000);
  const lo = skewMs - 1000 - LOGIN_ROUND_TRIP_ALLOWANCE_MS;
  if (skewMs % 1000 !== 0) return { lo, hi: skewMs + DATE_LAG_MS };
  return { lo, hi: skewMs + 2000 + LOGIN_ROUND_TRIP_ALLOWANCE_MS + DATE_LAG_MS };
}
