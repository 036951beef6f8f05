import { BrokerError } from '../errors.js';
import { ReceiptRejectedError } from '../ledger/errors.js';
import { describeCause } from './unavailable-cause.js';
import {
  BadRequestError,
  LedgerUnavailableVendError,
  ReceiptRefusedError,
  RefresherUnavailableError,
  TokenUnavailableError,
  VendError,
} from './vend-errors.js';

/**
 * The errors of the parts the vend API stands on, as answers: the ledger's and the store's outages become
 * 503 with Retry-After (never a permit or a token without them), the ledger's input checks become 400.
 * Anything else is not ours to explain: undefined, and the caller sees a plain 500. `credentialSet`: the set the
 * request named, for the 503's body.
 */
export function toVendError(error: unknown, credentialSet?: string): VendError | undefined {
  if (error instanceof VendError) return error;
  if (!(error instanceof BrokerError)) return undefined;
  if (error instanceof ReceiptRejectedError) return new ReceiptRefusedError(error.problem, error.message);
  switch (error.code) {
    case 'LEDGER_UNAVAILABLE':
      return new LedgerUnavailableVendError('the rate ledger did not answer; no permit without it', {
        retryAfterSeconds: 1,
        cause: error,
      });
    case 'TOKEN_STORE_UNAVAILABLE':
      return new TokenUnavailableError(credentialSet, describeCause('TOKEN_STORE_UNAVAILABLE'), {
        retryAfterSeconds: 2,
        cause: error,
      });
    case 'UNKNOWN_PERMIT_CLASS':
      return new BadRequestError('INVALID_VALUE', 'class', 'not a permit class of this credential set');
    case 'INVALID_PERMIT_COUNT':
      return new BadRequestError('INVALID_VALUE', 'count', 'more than a limit allows');
    case 'INVALID_LEDGER_REQUEST':
      return new BadRequestError('INVALID_VALUE', 'body', 'not acceptable to the rate ledger');
    default:
      if (error instanceof RefresherUnavailableError) {
        return new TokenUnavailableError(credentialSet, describeCause('REFRESHER_UNAVAILABLE'), {
          retryAfterSeconds: 5,
          cause: error,
        });
      }
      return undefined;
  }
}
