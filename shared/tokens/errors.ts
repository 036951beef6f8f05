import { BrokerError } from '../errors.js';

/** The tokens table could not be read or written (not a lost condition: an outage or a bug). */
export class TokenStoreUnavailableError extends BrokerError {
  readonly code = 'TOKEN_STORE_UNAVAILABLE';
}

/** A refresh request names no configured credential set. */
export class UnknownCredentialSetError extends BrokerError {
  readonly code = 'UNKNOWN_CREDENTIAL_SET';
}

/** A refresh request (an invoke payload) is malformed; the message names the field. */
export class InvalidRefreshRequestError extends BrokerError {
  readonly code = 'INVALID_REFRESH_REQUEST';
}

/** The vendor minted a token for another environment than the set declares. The token is discarded. */
export class TokenEnvMismatchError extends BrokerError {
  readonly code = 'ENV_MISMATCH';
}

/** The vendor's token expires too soon or absurdly late to be trusted. The token is discarded. */
export class TokenLifetimeError extends BrokerError {
  readonly code = 'TOKEN_LIFETIME_INVALID';
}

/** The vendor's clock (its `Date` header) is further from ours than the set accepts. The token is discarded. */
export class ClockSkewError extends BrokerError {
  readonly code = 'CLOCK_SKEW_EXCESSIVE';
}
