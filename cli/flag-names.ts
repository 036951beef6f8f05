import { BrokerApiError } from '../client/errors.js';
import { UsageError } from './errors.js';

/**
 * A 400 of the broker names the field of its request that it refused (`details.field`, e.g. `minValiditySeconds`),
 * which the operator never typed: for a field that a command's own option sets, the error becomes a usage error
 * that names the option as typed (`--min-validity`). Any other error is returned as it is.
 */
export function inTheFlagsTyped(
  error: unknown,
  command: string,
  flagOfField: Record<string, string>,
): unknown {
  if (!(error instanceof BrokerApiError) || error.status !== 400) return error;
  const field = error.details?.field;
  if (typeof field !== 'string' || !Object.hasOwn(flagOfField, field)) return error;
  // The broker's message is "<field>: <problem>" after the client's "broker answered 400 <CODE>: ".
  const problem = error.message.replace(/^broker answered \d+ [A-Z0-9_]+: /, '').replace(`${field}: `, '');
  return new UsageError(`${flagOfField[field]} ${problem} (the broker refused it: ${error.code})`, command);
}
