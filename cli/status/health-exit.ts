import { ExitCode, type ExitCodeValue } from '../exit-codes.js';

/** States whose set has no token to serve: its consumers get 503 TOKEN_UNAVAILABLE. */
const WITHOUT_TOKEN = new Set(['NO_USABLE_TOKEN', 'CREDENTIALS_REJECTED', 'ENV_MISMATCH']);
/** States in which all is well: REFRESHING is a re-login due, the token still good. */
const WELL = new Set(['HEALTHY', 'REFRESHING']);

export const isWell = (state: string): boolean => WELL.has(state);

/**
 * `status`'s exit code by the health of the sets it shows, so that a pipeline can gate on it: the worst set
 * decides. A state this CLI does not know (a newer broker's) counts as DEGRADED: not well, and not known to be
 * without a token.
 */
export function healthExit(states: readonly string[]): ExitCodeValue {
  if (states.some((state) => WITHOUT_TOKEN.has(state))) return ExitCode.NoToken;
  if (states.some((state) => !isWell(state))) return ExitCode.Degraded;
  return ExitCode.Ok;
}
