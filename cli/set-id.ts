import { credentialSetSchema } from '../shared/config/credential-sets.js';
import { UsageError } from './errors.js';

/** A credential set id as the configuration allows it, or a UsageError (nothing is asked of the broker). */
export function checkSetId(command: string, value: string | undefined): string {
  if (value === undefined || !credentialSetSchema.shape.id.safeParse(value).success) {
    throw new UsageError(
      'not a credential set id (lowercase letters, digits and dashes, e.g. uat-advisor)',
      command,
    );
  }
  return value;
}
