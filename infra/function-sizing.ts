import { Duration } from 'aws-cdk-lib';
import { DEFAULT_RETRY_SETTINGS } from '../shared/vendor-client/retry.js';

/**
 * Timeouts follow from the vendor client's retry budget, so that a function is never cut off in the middle
 * of the retries the vendor asks for (vendor-api.md §7: back off on 5xx, wait Retry-After on 429).
 */

/** The client's per-attempt timeout (shared/vendor-client/client.ts default). */
export const VENDOR_ATTEMPT_TIMEOUT_SECONDS = 10;

/**
 * The longest one login can take: retries may start until the budget is spent, and the last attempt may
 * then run for its full timeout.
 */
export const LOGIN_WORST_CASE_SECONDS =
  DEFAULT_RETRY_SETTINGS.budgetMs / 1000 + VENDOR_ATTEMPT_TIMEOUT_SECONDS;

/** Secrets Manager and DynamoDB calls around a login (SDK retries included), generously. */
const AWS_CALLS_SECONDS = 15;

/**
 * Refresher: a scheduled run logs in for the sets that need it, REFRESH_CONCURRENCY (default 4) at a time;
 * two rounds of worst-case logins fit, well inside the schedule period so that runs do not pile up.
 */
export const REFRESHER_TIMEOUT = Duration.seconds(2 * LOGIN_WORST_CASE_SECONDS + 2 * AWS_CALLS_SECONDS);

/**
 * How long a vend request waits for an on-demand re-login: the vend function's LambdaRefreshInvoker gives up
 * after 12 s (its own wait is 10 s). The login itself goes on in the refresher, under the refresher's
 * timeout, and the next request finds its token: consumers are not held for a whole vendor retry budget.
 */
export const VEND_REFRESH_WAIT_SECONDS = 12;

/** Vend: the longest wait for a re-login, plus the token store and ledger calls around it. */
export const VEND_TIMEOUT = Duration.seconds(VEND_REFRESH_WAIT_SECONDS + AWS_CALLS_SECONDS + 3);

/**
 * Memory buys CPU in Lambda: the vend function is on consumers' request path, so it gets more for faster
 * cold starts; the refresher mostly waits on the network.
 */
export const VEND_MEMORY_MB = 1024;
export const REFRESHER_MEMORY_MB = 512;

/**
 * The refresher's reserved concurrency: a share of the account's concurrency that vend traffic (or any other
 * function of the account) cannot take, and a cap. It needs one instance for a scheduled run (every set in
 * one invocation) and one per on-demand re-login in progress: the lease lets one login per set happen at a
 * time, and each vend instance waiting for a set's new token holds one refresher instance while it polls.
 * Ten covers a scheduled run plus a burst of waiting vend instances; a waiter throttled beyond that gets
 * 503 TOKEN_UNAVAILABLE with Retry-After and finds the token in the table on its next request.
 */
export const REFRESHER_RESERVED_CONCURRENCY = 10;

/**
 * Lease renewer (two-Region stages): a run is scheduled every minute and renews every RENEW_MS (10 s) within
 * it, so it lasts about a minute; the timeout leaves room for the last renewal's DynamoDB calls (SDK retries
 * included). It never calls the vendor: little memory. Two instances at most: a run and the next one, which
 * may start before the first has returned; more would only mean runs piling up.
 */
export const RENEWER_RUN_SECONDS = 60;
export const RENEWER_TIMEOUT = Duration.seconds(RENEWER_RUN_SECONDS + AWS_CALLS_SECONDS);
export const RENEWER_MEMORY_MB = 256;
export const RENEWER_RESERVED_CONCURRENCY = 2;
